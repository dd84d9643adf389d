//! The method's templates and the placeholders each may use: what every one renders, with an example
//! (`incharacter prompts` prints this table). The order of [`SPECS`] is the order of [`Template`].

/// One template of the method; its name is its file name without `.txt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Template {
    ExpertRating,
    ExpertConversation,
    OptionConversion,
    DimensionConversion,
    SelfReportEn,
    SelfReportZh,
    SelfReportCotEn,
    SelfReportCotZh,
    Interviewer,
    Reask,
    SchemaInstruction,
    ExpertRule,
    ExpertRulePoles,
    ExpertResult,
    ExpertResultPoles,
    ExpertExchange,
    ExpertSeparator,
    OcOption,
    OcOptionSeparator,
    OcSample,
    OcSampleSeparator,
    OcSamples,
    DocOption,
    DocOptionSeparator,
    DocLabelEnd,
    DocLabelSide,
    DocLabelMiddle,
    DocSample,
    DocSampleSeparator,
    DocSamples,
    SrOption,
    SrOptionSeparatorEn,
    SrOptionSeparatorZh,
    RolegptEn,
    RolegptZh,
    RolegptCatchphrasesEn,
    RolegptCatchphrasesZh,
    Catchphrase,
    CatchphraseSeparator,
    ScenesEn,
    ScenesZh,
    SceneSeparator,
    FinalInstruction,
    RolegptNoWorkEn,
    RolegptNoWorkZh,
}

/// A placeholder a template may use, what the method puts in its place, and an example of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placeholder {
    pub name: &'static str,
    pub meaning: &'static str,
    pub example: &'static str,
}

const fn slot(name: &'static str, meaning: &'static str, example: &'static str) -> Placeholder {
    Placeholder { name, meaning, example }
}

const SCALE_NAME: Placeholder = slot("scale_name", "the scale's name", "Big Five Inventory");
const SCALE_ID: Placeholder = slot("scale_id", "the scale's id", "BFI");
const EXPERIMENTER_MASK: Placeholder = slot(
    "experimenter",
    "the experimenter's mask (names are anonymized for the judge)",
    "<the experimenter>",
);
const PARTICIPANT_MASK: Placeholder = slot("participant", "the character's mask", "<the participant>");
const DIMENSION: Placeholder = slot("dimension", "the dimension's name", "Extraversion");
const DESCRIPTION: Placeholder = slot(
    "description",
    "the dimension's description (English)",
    "Extraversion captures how much a person seeks out…",
);
const DIMENSION_NOTE: Placeholder = slot(
    "dimension.note",
    "the dimension's `note` in the scale file (an extra instruction for this dimension); empty if none",
    "Judge by energy and appetite for company, not by warmth.",
);
const DIMENSION_LOW: Placeholder = slot("dimension.low", "the word for the dimension's low end (English)", "introverted");
const DIMENSION_HIGH: Placeholder = slot("dimension.high", "the word for the dimension's high end (English)", "extraverted");
const DIMENSION_INSTRUCTION: Placeholder = slot(
    "dimension.conversion_instruction",
    "the dimension's `conversion_instruction` in the scale file (English), {character} in it filled; empty if none",
    "Each choice is a number from 1 to 7. … 1 denotes 'strongly introverted', …",
);
const POLE_A_LETTER: Placeholder = slot(
    "pole_a.letter",
    "two-pole dimensions: the first pole's letter, whose percentage is the score (empty on other scales)",
    "E",
);
const POLE_A_NAME: Placeholder = slot("pole_a.name", "two-pole dimensions: the first pole's name", "extraverted");
const POLE_B_LETTER: Placeholder = slot("pole_b.letter", "two-pole dimensions: the second pole's letter", "I");
const POLE_B_NAME: Placeholder = slot("pole_b.name", "two-pole dimensions: the second pole's name", "introverted");
const RANGE_MIN: Placeholder = slot("range.min", "the lowest option's number", "1");
const RANGE_MID: Placeholder = slot("range.mid", "the middle of the range (a decimal when no option is in the middle)", "3");
const RANGE_MAX: Placeholder = slot("range.max", "the highest option's number", "5");
const OPTION_MIN: Placeholder = slot("option.min", "the lowest option's label (English)", "Disagree strongly");
const OPTION_MID: Placeholder = slot(
    "option.mid",
    "the middle option's label (English); empty when no option is in the middle",
    "Neither agree nor disagree",
);
const OPTION_MAX: Placeholder = slot("option.max", "the highest option's label (English)", "Agree strongly");
const SCALE_INSTRUCTION: Placeholder = slot(
    "scale.conversion_instruction",
    "the scale's `conversion_instruction` (English), {character} in it filled; empty if none",
    "Each choice is a number from 1 to 5. Please evaluate Hermione Granger … 1 denotes 'strongly disagree', …",
);
const QUESTIONNAIRE_PROMPT: Placeholder = slot(
    "scale.questionnaire_prompt",
    "the scale's `questionnaire_prompt` (a questionnaire's own instruction, e.g. PsychoBench's); empty if none",
    "You can only reply numbers from 1 to 5 in the following statements. …",
);
const SCALE_CONVERSION_PROMPT: Placeholder = slot(
    "scale.conversion_prompt",
    "the scale's `conversion_prompt` (a questionnaire's own OC task description, English), {character} in it filled; empty if none",
    "I have conducted many conversations with Hermione Granger. …",
);
const QUESTIONNAIRE_SETTING: Placeholder = slot(
    "scale.questionnaire_setting",
    "the scale's `questionnaire_setting` (PsychoBench's `inner_setting`); empty if none",
    "You are a helpful assistant who can only reply numbers from 1 to 7 …",
);
const DIMENSION_PROMPT: Placeholder = slot(
    "dimension.conversion_prompt",
    "the dimension's `conversion_prompt` (its own d-OC task description), {character} in it filled; empty if none",
    "… convert each conversation into a choice indicating whether <the participant> displays …",
);
const SELF_REPORT_INSTRUCTION: Placeholder = slot(
    "scale.self_report_instruction",
    "the scale's `self_report_instruction` in the character's language; empty if none",
    "Reply a number from 1 to 5 using the scales: … Please answer with the number only.",
);
const CHARACTER: Placeholder = slot("character", "the character's name", "Hermione Granger");
const CHARACTER_ALIAS: Placeholder = slot(
    "character.alias",
    "the character's first alias (its name when it has none)",
    "Hermione",
);
const EXPERIMENTER: Placeholder = slot("experimenter", "the character's experimenter, who asks", "Harry");
const EXAMPLE: Placeholder = slot(
    "example",
    "an example reply, a JSON object keyed by item id",
    "{\"1\":5,\"6\":\"x\"}",
);
const STEM: Placeholder = slot(
    "stem",
    "the scale's `self_report_stem` in the character's language, with the item's statement in it",
    "Do you see yourself as someone who fits this description: \"Is talkative.\" …",
);
const STATEMENT_LOCAL: Placeholder = slot("statement", "the item's statement, in the character's language", "Is talkative.");
const OPTIONS_LOCAL: Placeholder = slot(
    "options",
    "the scale's options in the character's language, each by sr_option, joined by sr_option_separator",
    "1 = Disagree strongly; 2 = Disagree a little; …",
);
const VALUE: Placeholder = slot("value", "the option's number", "1");
const CONVERSATION: Placeholder = slot(
    "conversation",
    "the call's exchanges, each by expert_exchange, joined by expert_separator",
    "1. <the experimenter>: 「Are you talkative?」\n<the participant>: 「Oh, rather.」",
);
const QUESTION_MASKED: Placeholder = slot("question", "the question as asked, anonymized", "Are you talkative?");
const ANSWER_MASKED: Placeholder = slot(
    "answer",
    "the answer, anonymized, without a leading speaker's name or corner brackets it may carry",
    "Oh, rather.",
);
const ID: Placeholder = slot("id", "the item's number, the key the reply uses for it", "6");
const STATEMENT_EN: Placeholder = slot("statement", "the item's statement (English)", "Is reserved.");
const SAMPLES: Placeholder = slot(
    "samples",
    "the call's items, each by its sample template, joined by its separator",
    "  \"1\": {…},\n  \"6\": {…}",
);

/// What the method knows about one template.
pub(super) struct Spec {
    pub name: &'static str,
    pub bundled: &'static str,
    pub placeholders: &'static [Placeholder],
    /// Each group must be represented by at least one of its names.
    pub required: &'static [&'static [&'static str]],
    /// The template writes JSON: every value is escaped as the inside of a JSON string.
    pub json: bool,
}

const fn spec(
    name: &'static str,
    bundled: &'static str,
    placeholders: &'static [Placeholder],
    required: &'static [&'static [&'static str]],
) -> Spec {
    Spec {
        name,
        bundled,
        placeholders,
        required,
        json: false,
    }
}

const fn json(spec: Spec) -> Spec {
    Spec { json: true, ..spec }
}

/// The self-report questions (SR, SR-CoT; one per language) share their placeholders.
const fn self_report(name: &'static str, bundled: &'static str) -> Spec {
    spec(
        name,
        bundled,
        &[
            STEM,
            STATEMENT_LOCAL,
            OPTIONS_LOCAL,
            EXPERIMENTER,
            CHARACTER,
            CHARACTER_ALIAS,
            SELF_REPORT_INSTRUCTION,
            QUESTIONNAIRE_PROMPT,
            QUESTIONNAIRE_SETTING,
            RANGE_MIN,
            RANGE_MAX,
        ],
        &[&["stem", "statement"]],
    )
}

/// What an option of a list is rendered from.
const OPTION: &[Placeholder] = &[VALUE, slot("label", "the option's label", "Disagree strongly")];

/// The range-scale rule and result form.
const RANGE: &[Placeholder] = &[
    RANGE_MIN,
    RANGE_MID,
    RANGE_MAX,
    OPTION_MIN,
    OPTION_MID,
    OPTION_MAX,
    DIMENSION,
    DIMENSION_LOW,
    DIMENSION_HIGH,
    DIMENSION_NOTE,
];

/// The two-pole rule and result form.
const POLES: &[Placeholder] = &[
    POLE_A_LETTER,
    POLE_A_NAME,
    POLE_B_LETTER,
    POLE_B_NAME,
    DIMENSION,
    DIMENSION_NOTE,
];

macro_rules! asset {
    ($file:literal) => {
        include_str!(concat!("../../assets/prompts/", $file))
    };
}

pub(super) const SPECS: [Spec; 45] = [
    spec(
        "expert_rating",
        asset!("expert_rating.txt"),
        &[
            SCALE_NAME,
            SCALE_ID,
            EXPERIMENTER_MASK,
            PARTICIPANT_MASK,
            DIMENSION,
            DESCRIPTION,
            slot(
                "rule",
                "how to rate: expert_rule, or expert_rule_poles on a two-pole scale",
                "Rate on a scale from 1 to 5: 1 means strongly introverted, …",
            ),
            slot("language", "the conversation's language, English or Chinese", "English"),
            slot(
                "result_form",
                "the form of \"result\" in the reply: expert_result, or expert_result_poles",
                "<a number from 1 to 5>",
            ),
            DIMENSION_NOTE,
            DIMENSION_LOW,
            DIMENSION_HIGH,
            RANGE_MIN,
            RANGE_MID,
            RANGE_MAX,
            OPTION_MIN,
            OPTION_MID,
            OPTION_MAX,
            POLE_A_LETTER,
            POLE_A_NAME,
            POLE_B_LETTER,
            POLE_B_NAME,
        ],
        &[&["dimension"]],
    ),
    spec(
        "expert_conversation",
        asset!("expert_conversation.txt"),
        &[CONVERSATION],
        &[&["conversation"]],
    ),
    spec(
        "option_conversion",
        asset!("option_conversion.txt"),
        &[
            CHARACTER,
            CHARACTER_ALIAS,
            SCALE_NAME,
            SCALE_ID,
            slot(
                "options",
                "the scale's options (English), each by oc_option, joined by oc_option_separator",
                "1 = Disagree strongly, 2 = Disagree a little, …",
            ),
            EXAMPLE,
            SCALE_INSTRUCTION,
            SCALE_CONVERSION_PROMPT,
            QUESTIONNAIRE_PROMPT,
            QUESTIONNAIRE_SETTING,
            RANGE_MIN,
            RANGE_MID,
            RANGE_MAX,
            OPTION_MIN,
            OPTION_MID,
            OPTION_MAX,
        ],
        &[&["options", "scale.conversion_instruction"]],
    ),
    spec(
        "dimension_conversion",
        asset!("dimension_conversion.txt"),
        &[
            SCALE_NAME,
            SCALE_ID,
            PARTICIPANT_MASK,
            EXPERIMENTER_MASK,
            DIMENSION,
            DESCRIPTION,
            slot(
                "options",
                "the dimension's options, each by doc_option, joined by doc_option_separator",
                "1 = strongly introverted\n2 = somewhat introverted\n…",
            ),
            EXAMPLE,
            DIMENSION_INSTRUCTION,
            DIMENSION_PROMPT,
            DIMENSION_NOTE,
            DIMENSION_LOW,
            DIMENSION_HIGH,
            RANGE_MIN,
            RANGE_MID,
            RANGE_MAX,
            POLE_A_LETTER,
            POLE_A_NAME,
            POLE_B_LETTER,
            POLE_B_NAME,
        ],
        &[&["dimension", "dimension.conversion_instruction"], &["options", "dimension.conversion_instruction"]],
    ),
    self_report("self_report.en", asset!("self_report.en.txt")),
    self_report("self_report.zh", asset!("self_report.zh.txt")),
    self_report("self_report_cot.en", asset!("self_report_cot.en.txt")),
    self_report("self_report_cot.zh", asset!("self_report_cot.zh.txt")),
    spec(
        "interviewer",
        asset!("interviewer.txt"),
        &[
            EXPERIMENTER,
            CHARACTER,
            slot("question", "the item's open question, in the character's language", "Are you talkative?"),
            CHARACTER_ALIAS,
        ],
        &[&["question"]],
    ),
    spec(
        "reask",
        asset!("reask.txt"),
        &[slot(
            "problem",
            "why the judge's previous reply could not be used",
            "\"result\" is 7, outside 1–5",
        )],
        &[&["problem"]],
    ),
    spec(
        "schema_instruction",
        asset!("schema_instruction.txt"),
        &[slot(
            "schema",
            "the reply's JSON Schema, on one line (sent when a server takes no structured outputs)",
            "{\"type\":\"object\",…}",
        )],
        &[&["schema"]],
    ),
    spec("expert_rule", asset!("expert_rule.txt"), RANGE, &[]),
    spec("expert_rule_poles", asset!("expert_rule_poles.txt"), POLES, &[]),
    spec("expert_result", asset!("expert_result.txt"), RANGE, &[]),
    json(spec("expert_result_poles", asset!("expert_result_poles.txt"), POLES, &[])),
    spec(
        "expert_exchange",
        asset!("expert_exchange.txt"),
        &[
            slot("number", "the exchange's place in the call, from 1", "1"),
            slot("item", "the item's number in the questionnaire", "6"),
            EXPERIMENTER_MASK,
            PARTICIPANT_MASK,
            QUESTION_MASKED,
            ANSWER_MASKED,
            STATEMENT_EN,
        ],
        &[&["answer"]],
    ),
    spec("expert_separator", asset!("expert_separator.txt"), &[], &[]),
    spec("oc_option", asset!("oc_option.txt"), OPTION, &[]),
    spec("oc_option_separator", asset!("oc_option_separator.txt"), &[], &[]),
    json(spec(
        "oc_sample",
        asset!("oc_sample.txt"),
        &[
            ID,
            STATEMENT_EN,
            slot("question", "the question as the character was asked it", "Are you reserved?"),
            slot("answer", "the character's answer as given", "Hermione: 「Not at all!」"),
            CHARACTER,
            CHARACTER_ALIAS,
        ],
        &[&["answer"]],
    )),
    spec("oc_sample_separator", asset!("oc_sample_separator.txt"), &[], &[]),
    spec("oc_samples", asset!("oc_samples.txt"), &[SAMPLES], &[&["samples"]]),
    spec("doc_option", asset!("doc_option.txt"), OPTION, &[]),
    spec("doc_option_separator", asset!("doc_option_separator.txt"), &[], &[]),
    spec(
        "doc_label_end",
        asset!("doc_label_end.txt"),
        &[slot("pole", "the word for the end of the dimension the option is at", "introverted")],
        &[],
    ),
    spec(
        "doc_label_side",
        asset!("doc_label_side.txt"),
        &[slot("pole", "the word for the end of the dimension the option leans to", "introverted")],
        &[],
    ),
    spec("doc_label_middle", asset!("doc_label_middle.txt"), &[DIMENSION_LOW, DIMENSION_HIGH], &[]),
    json(spec(
        "doc_sample",
        asset!("doc_sample.txt"),
        &[ID, STATEMENT_EN, QUESTION_MASKED, slot("answer", "the answer, anonymized", "<the participant>: 「Not at all!」"), EXPERIMENTER_MASK, PARTICIPANT_MASK],
        &[&["answer"]],
    )),
    spec("doc_sample_separator", asset!("doc_sample_separator.txt"), &[], &[]),
    spec("doc_samples", asset!("doc_samples.txt"), &[SAMPLES], &[&["samples"]]),
    spec("sr_option", asset!("sr_option.txt"), OPTION, &[]),
    spec("sr_option_separator.en", asset!("sr_option_separator.en.txt"), &[], &[]),
    spec("sr_option_separator.zh", asset!("sr_option_separator.zh.txt"), &[], &[]),
    spec("rolegpt.en", asset!("rolegpt.en.txt"), ROLEGPT, &[]),
    spec("rolegpt.zh", asset!("rolegpt.zh.txt"), ROLEGPT, &[]),
    spec("rolegpt_catchphrases.en", asset!("rolegpt_catchphrases.en.txt"), PHRASES, &[]),
    spec("rolegpt_catchphrases.zh", asset!("rolegpt_catchphrases.zh.txt"), PHRASES, &[]),
    spec(
        "catchphrase",
        asset!("catchphrase.txt"),
        &[slot("phrase", "one of the character's catchphrases", "Honestly, doesn't anyone read anymore?")],
        &[],
    ),
    spec("catchphrase_separator", asset!("catchphrase_separator.txt"), &[], &[]),
    spec("scenes.en", asset!("scenes.en.txt"), SCENES, &[&["scenes"]]),
    spec("scenes.zh", asset!("scenes.zh.txt"), SCENES, &[&["scenes"]]),
    spec("scene_separator", asset!("scene_separator.txt"), &[], &[]),
    spec(
        "final_instruction",
        asset!("final_instruction.txt"),
        &[
            slot("turn", "the last user message: the experimenter's line", "Harry:「Are you talkative?」"),
            slot(
                "instruction",
                "the character's final instruction (a card's post_history_instructions)",
                "[Answer in one short paragraph.]",
            ),
        ],
        &[&["turn"]],
    ),
    spec("rolegpt_no_work.en", asset!("rolegpt_no_work.en.txt"), ROLEGPT_NO_WORK, &[]),
    spec("rolegpt_no_work.zh", asset!("rolegpt_no_work.zh.txt"), ROLEGPT_NO_WORK, &[]),
];

/// The rolegpt style's system instruction.
const ROLEGPT: &[Placeholder] = &[
    CHARACTER,
    CHARACTER_ALIAS,
    slot("work", "the work the character comes from", "Harry Potter (J. K. Rowling)"),
    ROLEGPT_DESCRIPTION,
    ROLEGPT_CATCHPHRASES,
];

/// The rolegpt style's system instruction for a character whose work is not known.
const ROLEGPT_NO_WORK: &[Placeholder] = &[CHARACTER, CHARACTER_ALIAS, ROLEGPT_DESCRIPTION, ROLEGPT_CATCHPHRASES];

const ROLEGPT_DESCRIPTION: Placeholder = slot("description", "the character's description", "You are Hermione Granger, …");
const ROLEGPT_CATCHPHRASES: Placeholder = slot(
    "catchphrases",
    "rolegpt_catchphrases with the character's catchphrases, or nothing when it has none",
    "Your catchphrases: “Honestly, doesn't anyone read anymore?” …\n",
);

const PHRASES: &[Placeholder] = &[slot(
    "phrases",
    "the catchphrases, each by catchphrase, joined by catchphrase_separator",
    "“Honestly, doesn't anyone read anymore?” “It's all in Hogwarts: A History, you know.”",
)];

/// The chatharuhi style's message of classic scenes.
const SCENES: &[Placeholder] = &[
    CHARACTER,
    CHARACTER_ALIAS,
    slot(
        "scenes",
        "the memories retrieved for the question, joined by scene_separator",
        "Harry:「…」\nHermione:「…」\n###\nRon:「…」",
    ),
];

impl Template {
    pub const ALL: [Template; 45] = [
        Template::ExpertRating,
        Template::ExpertConversation,
        Template::OptionConversion,
        Template::DimensionConversion,
        Template::SelfReportEn,
        Template::SelfReportZh,
        Template::SelfReportCotEn,
        Template::SelfReportCotZh,
        Template::Interviewer,
        Template::Reask,
        Template::SchemaInstruction,
        Template::ExpertRule,
        Template::ExpertRulePoles,
        Template::ExpertResult,
        Template::ExpertResultPoles,
        Template::ExpertExchange,
        Template::ExpertSeparator,
        Template::OcOption,
        Template::OcOptionSeparator,
        Template::OcSample,
        Template::OcSampleSeparator,
        Template::OcSamples,
        Template::DocOption,
        Template::DocOptionSeparator,
        Template::DocLabelEnd,
        Template::DocLabelSide,
        Template::DocLabelMiddle,
        Template::DocSample,
        Template::DocSampleSeparator,
        Template::DocSamples,
        Template::SrOption,
        Template::SrOptionSeparatorEn,
        Template::SrOptionSeparatorZh,
        Template::RolegptEn,
        Template::RolegptZh,
        Template::RolegptCatchphrasesEn,
        Template::RolegptCatchphrasesZh,
        Template::Catchphrase,
        Template::CatchphraseSeparator,
        Template::ScenesEn,
        Template::ScenesZh,
        Template::SceneSeparator,
        Template::FinalInstruction,
        Template::RolegptNoWorkEn,
        Template::RolegptNoWorkZh,
    ];

    pub(super) fn spec(self) -> &'static Spec {
        &SPECS[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    pub fn file_name(self) -> String {
        format!("{}.txt", self.name())
    }

    pub fn from_name(name: &str) -> Option<Template> {
        Template::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Whether the role-playing agent reads it (the interview's wording) rather than the judge.
    pub fn is_interview(self) -> bool {
        matches!(
            self,
            Template::Interviewer
                | Template::SelfReportEn
                | Template::SelfReportZh
                | Template::SelfReportCotEn
                | Template::SelfReportCotZh
                | Template::SrOption
                | Template::SrOptionSeparatorEn
                | Template::SrOptionSeparatorZh
                | Template::RolegptEn
                | Template::RolegptZh
                | Template::RolegptNoWorkEn
                | Template::RolegptNoWorkZh
                | Template::RolegptCatchphrasesEn
                | Template::RolegptCatchphrasesZh
                | Template::Catchphrase
                | Template::CatchphraseSeparator
                | Template::ScenesEn
                | Template::ScenesZh
                | Template::SceneSeparator
                | Template::FinalInstruction
        )
    }

    /// Whether the template writes JSON, every value escaped as the inside of a JSON string.
    pub fn is_json(self) -> bool {
        self.spec().json
    }

    /// Every placeholder the template may use.
    pub fn placeholders(self) -> &'static [Placeholder] {
        self.spec().placeholders
    }

    /// Groups of placeholders of which the template must use at least one each.
    pub fn required(self) -> &'static [&'static [&'static str]] {
        self.spec().required
    }

    pub fn is_required(self, name: &str) -> bool {
        self.required().iter().any(|group| group.contains(&name))
    }

    /// The text compiled into the binary.
    pub fn bundled_text(self) -> &'static str {
        self.spec().bundled
    }
}
