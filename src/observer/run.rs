//! The model calls of an observer run, all with JSON schemas and the judge's bounded re-ask policy:
//! per observer a relationship, then K scenarios, then one dialogue per scenario (the observer opens,
//! turns alternate as `{"utterance", "end"}`), then its IPIP-50 report on the subject at temperature 0;
//! per subject its own IPIP-50 self-report. Every step is sent to the sink as it completes; what `done`
//! holds (from the journal) is never asked again, and a dialogue cut short continues from its last turn.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::future::join_all;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use super::{Done, ObservePlan, ObserverSpec, SCALE, SelfReportMode, Side, Step, SubjectSpec, Turn, dialogue_over};
use crate::catalog::Catalog;
use crate::domain::rng::mix;
use crate::domain::scale::Scale;
use crate::domain::scoring::ItemOption;
use crate::llm::{ChatMessage, ChatModel, ChatRequest, ResponseSchema, Role};
use crate::method::judge::{self, JudgeFailure};
use crate::method::judge_json::{self, ReplyError};
use crate::rpa::prompt::{self, RpaStyle};
use crate::templates::Templates;

pub struct ObserveEngine {
    pub catalog: Arc<Catalog>,
    pub subject_model: Arc<dyn ChatModel>,
    pub observer_model: Arc<dyn ChatModel>,
}

/// The subject as the other side sees it: name, who it is, and the system prompt of its agent.
struct Who {
    name: String,
    profile: String,
    system: String,
}

/// The system prompt of the calls that design the situation (relationship, scenarios).
const DESIGNER: &str = "You design realistic social situations for a study of personality perception.";

/// One observer paired with one subject: what every step of their run reads and where it reports.
struct Pair<'a> {
    plan: &'a ObservePlan,
    done: &'a Done,
    sink: &'a UnboundedSender<Step>,
    s: &'a SubjectSpec,
    who: &'a Who,
    o: &'a ObserverSpec,
}

impl Pair<'_> {
    fn key(&self) -> (String, String) {
        (self.s.id.clone(), self.o.id.clone())
    }

    /// The observer's name, as the subject and the transcripts call it.
    fn me(&self) -> &str {
        &self.o.persona.name
    }

    /// A seed per step, so a step asked again (after a crash) gets the same seed.
    fn seed(&self, what: &str) -> u64 {
        self.plan.seed ^ hash(&[&self.s.id, &self.o.id, what])
    }

    /// A turn as a transcript line, "Name: utterance".
    fn line(&self, t: &Turn) -> String {
        let n = if t.speaker == Side::Observer {
            self.me()
        } else {
            &self.who.name
        };
        format!("{n}: {}", t.utterance)
    }

    fn fail(&self, what: &str, e: JudgeFailure) {
        self.asker().fail(what, e);
    }

    /// Who asks on this pair's behalf: its observer, about its subject.
    fn asker(&self) -> Asker<'_> {
        Asker {
            plan: self.plan,
            sink: self.sink,
            subject: &self.s.id,
            observer: Some(&self.o.id),
        }
    }
}

/// A questionnaire's usable options, and the items asked again on their own (their first reply
/// had no usable option for them; those still without one are left out).
type Questionnaire = (BTreeMap<u32, ItemOption>, Vec<u32>);

/// Whose calls these are (a subject's own, or an observer's about it), under which plan, and where
/// their re-asks and failures are recorded.
struct Asker<'a> {
    plan: &'a ObservePlan,
    sink: &'a UnboundedSender<Step>,
    subject: &'a str,
    observer: Option<&'a str>,
}

impl Asker<'_> {
    fn fail(&self, what: &str, e: JudgeFailure) {
        let _ = self.sink.send(Step::Failed {
            subject: self.subject.to_string(),
            observer: self.observer.map(str::to_string),
            what: what.into(),
            error: e.to_string(),
        });
    }

    fn reasked(&self, purpose: &str, attempts: Vec<judge::Attempt>) {
        let _ = self.sink.send(Step::Reasked {
            subject: self.subject.to_string(),
            observer: self.observer.map(str::to_string),
            purpose: purpose.to_string(),
            attempts,
        });
    }
}

fn hash(parts: &[&str]) -> u64 {
    parts.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, p| {
        p.bytes()
            .fold(mix(h ^ 0x9e37), |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
    })
}

fn schema(name: &str, value: Value) -> ResponseSchema {
    ResponseSchema::new(name, value)
}

fn object(v: &Value) -> Result<&serde_json::Map<String, Value>, ReplyError> {
    v.as_object().ok_or(ReplyError::NotAnObject)
}

fn text_field(v: &Value, key: &str) -> Result<String, ReplyError> {
    let s = object(v)?
        .get(key)
        .ok_or_else(|| ReplyError::MissingKey(key.into()))?
        .as_str()
        .ok_or_else(|| ReplyError::Invalid(format!("\"{key}\" must be a string")))?
        .trim()
        .to_string();
    // Only zero-width characters, direction marks or control characters say nothing either.
    if crate::llm::is_empty_reply(&s) {
        return Err(ReplyError::Invalid(format!("\"{key}\" is empty")));
    }
    Ok(s)
}

fn parse_turn(reply: &str) -> Result<(String, bool), ReplyError> {
    let v = judge_json::extract(reply)?;
    let utterance = text_field(&v, "utterance")?;
    let end = match object(&v)?.get("end") {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => true,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => false,
        Some(other) => {
            return Err(ReplyError::Invalid(format!(
                "\"end\" must be true or false, not {other}"
            )));
        }
        None => return Err(ReplyError::MissingKey("end".into())),
    };
    Ok((utterance, end))
}

fn parse_scenarios(reply: &str, k: usize) -> Result<Vec<String>, ReplyError> {
    let v = judge_json::extract(reply)?;
    let list = object(&v)?
        .get("scenarios")
        .ok_or_else(|| ReplyError::MissingKey("scenarios".into()))?
        .as_array()
        .ok_or_else(|| ReplyError::Invalid("\"scenarios\" must be a list of strings".into()))?;
    let scenarios: Vec<String> = list
        .iter()
        .filter_map(|s| s.as_str().map(|s| s.trim().to_string()))
        .filter(|s| !s.is_empty())
        .collect();
    if scenarios.len() < k {
        return Err(ReplyError::Invalid(format!(
            "{} usable scenarios, {k} were asked for",
            scenarios.len()
        )));
    }
    Ok(scenarios.into_iter().take(k).collect())
}

impl ObserveEngine {
    fn scale(&self) -> &Scale {
        self.catalog.scale(SCALE).expect("IPIP-50 is bundled")
    }

    fn who(&self, subject: &SubjectSpec) -> Who {
        if let Some(p) = &subject.persona {
            return Who {
                name: p.name.clone(),
                profile: p.profile(),
                system: p.system_prompt(),
            };
        }
        let c = subject
            .character
            .as_deref()
            .and_then(|id| self.catalog.character(id))
            .expect("character subjects are checked when the plan is made");
        let assembled = prompt::assemble(Templates::bundled(), c, RpaStyle::Description, None, "", "");
        let system = assembled
            .messages
            .first()
            .map(|m| m.content.clone())
            .unwrap_or_else(|| c.description.clone());
        Who {
            name: c.name.clone(),
            profile: match c.source_work() {
                Some(work) => format!("{} (from {work}). {}", c.name, c.description),
                None => format!("{}. {}", c.name, c.description),
            },
            system,
        }
    }

    /// Runs what `done` lacks, sending each step to `sink`.
    pub async fn run(&self, plan: &ObservePlan, done: &Done, sink: &UnboundedSender<Step>) {
        join_all(plan.subjects.iter().map(|s| self.subject(plan, done, sink, s))).await;
    }

    async fn subject(&self, plan: &ObservePlan, done: &Done, sink: &UnboundedSender<Step>, s: &SubjectSpec) {
        let who = self.who(s);
        let own = Asker {
            plan,
            sink,
            subject: &s.id,
            observer: None,
        };
        let self_report = async {
            if done.self_reports.contains_key(&s.id) {
                return;
            }
            match self.self_report(&own, s, &who).await.and_then(|q| self.scorable(q)) {
                Ok((items, asked_again)) => {
                    let _ = sink.send(Step::SelfReport {
                        subject: s.id.clone(),
                        mode: plan.self_report,
                        left_out: self.left_out(&items),
                        asked_again,
                        items,
                    });
                }
                Err(e) => own.fail("self-report", e),
            }
        };
        let who = &who;
        let observers = join_all(s.observers.iter().map(|o| {
            self.observer(Pair {
                plan,
                done,
                sink,
                s,
                who,
                o,
            })
        }));
        tokio::join!(self_report, observers);
    }

    /// `request` asked until its reply parses (the judge's bounded re-ask policy); a usable reply
    /// that took more than one attempt is recorded by `asker` with every attempt.
    async fn json<T>(
        &self,
        asker: &Asker<'_>,
        model: &dyn ChatModel,
        mut request: ChatRequest,
        temperature: f32,
        attempts: u32,
        parse: impl Fn(&str) -> Result<T, ReplyError>,
    ) -> Result<T, JudgeFailure> {
        request.sampling.temperature = Some(temperature);
        let (result, attempts) = judge::ask_at(model, &request, attempts, temperature, parse).await;
        if result.is_ok() && attempts.len() > 1 {
            asker.reasked(&request.meta.purpose, attempts);
        }
        result
    }

    fn request(
        system: String,
        user: String,
        role: Role,
        purpose: String,
        seed: u64,
        schema: ResponseSchema,
    ) -> ChatRequest {
        let mut r = ChatRequest::new(vec![ChatMessage::system(system), ChatMessage::user(user)]);
        r.meta.role = role;
        r.meta.purpose = purpose;
        r.sampling.seed = Some(seed);
        r.sampling.max_tokens = Some(400);
        r.schema = Some(schema);
        r
    }

    /// One observer's run on one subject: relationship, scenarios, a dialogue per scenario, then the
    /// report. The first failing step is sent as `Step::Failed` and ends this observer's run.
    async fn observer(&self, pair: Pair<'_>) {
        let relationship = match self.relationship(&pair).await {
            Ok(r) => r,
            Err(e) => return pair.fail("relationship", e),
        };
        let scenarios = match self.scenarios(&pair, &relationship).await {
            Ok(list) => list,
            Err(e) => return pair.fail("scenarios", e),
        };
        let mut dialogues = Vec::new();
        for (i, scenario) in scenarios.iter().enumerate() {
            match self.dialogue(&pair, &relationship, i, scenario).await {
                Ok(turns) => dialogues.push((scenario.clone(), turns)),
                Err(e) => return pair.fail(&format!("dialogue {}", i + 1), e),
            }
        }
        if pair.done.reports.contains_key(&pair.key()) {
            return;
        }
        match self.report(&pair, &relationship, &dialogues).await.and_then(|q| self.scorable(q)) {
            Ok((items, asked_again)) => {
                let _ = pair.sink.send(Step::Report {
                    subject: pair.s.id.clone(),
                    observer: pair.o.id.clone(),
                    left_out: self.left_out(&items),
                    asked_again,
                    items,
                });
            }
            Err(e) => pair.fail("report", e),
        }
    }

    /// The relationship from the journal, or asked for and sent to the sink.
    async fn relationship(&self, pair: &Pair<'_>) -> Result<String, JudgeFailure> {
        let (s, o, who) = (pair.s, pair.o, pair.who);
        if let Some(r) = pair.done.relationships.get(&pair.key()) {
            return Ok(r.clone());
        }
        // The format hints name the fields but give no placeholder values: small models copy
        // those verbatim ("…", "what you say").
        let user = format!(
            "Person A: {}\n\nPerson B: {}\n\nDescribe, in two or three sentences, a plausible {} relationship \
             between B and A that fits both of them: how B knows A, how long, and how close they are. \
             Write it from B's point of view, starting with \"I am\". Reply as a JSON object whose one field, \
             \"relationship\", holds those sentences.",
            who.profile,
            o.persona.profile(),
            o.context.name()
        );
        let request = Self::request(
            DESIGNER.into(),
            user,
            Role::Observer,
            format!("relationship {} {}", s.id, o.id),
            pair.seed("relationship"),
            schema(
                "relationship",
                json!({"type": "object", "properties": {"relationship": {"type": "string"}},
                       "required": ["relationship"], "additionalProperties": false}),
            ),
        );
        let parse = |r: &str| text_field(&judge_json::extract(r)?, "relationship");
        let r = self
            .json(
                &pair.asker(),
                self.observer_model.as_ref(),
                request,
                pair.plan.temperature,
                pair.plan.max_attempts,
                parse,
            )
            .await?;
        let _ = pair.sink.send(Step::Relationship {
            subject: s.id.clone(),
            observer: o.id.clone(),
            relationship: r.clone(),
        });
        Ok(r)
    }

    /// The scenarios from the journal, or asked for and sent to the sink.
    async fn scenarios(&self, pair: &Pair<'_>, relationship: &str) -> Result<Vec<String>, JudgeFailure> {
        let (s, o) = (pair.s, pair.o);
        if let Some(list) = pair.done.scenarios.get(&pair.key()) {
            return Ok(list.clone());
        }
        let k = pair.plan.scenarios;
        let me = pair.me();
        let user = format!(
            "{me} and {subject} know each other: {relationship}\n\nWrite {k} short, concrete everyday \
             scenarios (one or two sentences each) in which {me} and {subject} talk, each chosen to bring out \
             a different side of {subject}'s personality (how they handle people, plans, stress, new ideas). \
             Reply as a JSON object whose one field, \"scenarios\", is a list of exactly {k} strings, one \
             scenario each.",
            subject = pair.who.name
        );
        let request = Self::request(
            DESIGNER.into(),
            user,
            Role::Observer,
            format!("scenarios {} {}", s.id, o.id),
            pair.seed("scenarios"),
            schema(
                "scenarios",
                json!({"type": "object", "properties": {"scenarios": {"type": "array", "items": {"type": "string"},
                       "minItems": k, "maxItems": k}}, "required": ["scenarios"], "additionalProperties": false}),
            ),
        );
        let list = self
            .json(
                &pair.asker(),
                self.observer_model.as_ref(),
                request,
                pair.plan.temperature,
                pair.plan.max_attempts,
                |r| parse_scenarios(r, k),
            )
            .await?;
        let _ = pair.sink.send(Step::Scenarios {
            subject: s.id.clone(),
            observer: o.id.clone(),
            scenarios: list.clone(),
        });
        Ok(list)
    }

    /// Scenario `i`'s dialogue, continued from the journal's turns until it is over.
    async fn dialogue(
        &self,
        pair: &Pair<'_>,
        relationship: &str,
        i: usize,
        scenario: &str,
    ) -> Result<Vec<Turn>, JudgeFailure> {
        let mut turns = pair
            .done
            .turns
            .get(&(pair.s.id.clone(), pair.o.id.clone(), i))
            .cloned()
            .unwrap_or_default();
        while !dialogue_over(&turns, pair.plan.turn_cap) {
            let turn = self.turn(pair, relationship, i, scenario, &turns).await?;
            let _ = pair.sink.send(Step::Turn {
                subject: pair.s.id.clone(),
                observer: pair.o.id.clone(),
                scenario: i,
                turn: turn.clone(),
            });
            turns.push(turn);
        }
        Ok(turns)
    }

    /// The next turn of a dialogue: the observer opens, then the sides alternate.
    async fn turn(
        &self,
        pair: &Pair<'_>,
        relationship: &str,
        i: usize,
        scenario: &str,
        turns: &[Turn],
    ) -> Result<Turn, JudgeFailure> {
        let (s, o, who) = (pair.s, pair.o, pair.who);
        let me = pair.me();
        let speaker = if turns.len().is_multiple_of(2) {
            Side::Observer
        } else {
            Side::Subject
        };
        let (model, system, name, other) = match speaker {
            Side::Observer => (
                self.observer_model.as_ref(),
                format!(
                    "{}\nYou are talking with {}. {}",
                    o.persona.system_prompt(),
                    who.name,
                    relationship
                ),
                me,
                who.name.as_str(),
            ),
            Side::Subject => (
                self.subject_model.as_ref(),
                format!(
                    "{}\nYou are talking with {me}, who describes your relationship so: {relationship}",
                    who.system
                ),
                who.name.as_str(),
                me,
            ),
        };
        let so_far: Vec<String> = turns.iter().map(|t| pair.line(t)).collect();
        let user = format!(
            "Situation: {scenario}\n\nConversation so far:\n{}\n\nIt is your turn, {name}: say your next line to \
             {other}{}. Reply as a JSON object with two fields: \"utterance\", your line in your own words, and \
             \"end\", true when you are ready to let the conversation close, else false.",
            if so_far.is_empty() {
                "(nothing yet)".to_string()
            } else {
                so_far.join("\n")
            },
            if turns.is_empty() {
                ", opening the conversation"
            } else {
                ""
            }
        );
        let request = Self::request(
            system,
            user,
            if speaker == Side::Observer {
                Role::Observer
            } else {
                Role::Rpa
            },
            format!("dialogue {} {} {} turn {}", s.id, o.id, i + 1, turns.len() + 1),
            pair.seed(&format!("turn {i} {}", turns.len())),
            schema(
                "turn",
                json!({"type": "object", "properties": {"utterance": {"type": "string"}, "end": {"type": "boolean"}},
                       "required": ["utterance", "end"], "additionalProperties": false}),
            ),
        );
        let (utterance, end) = self
            .json(
                &pair.asker(),
                model,
                request,
                pair.plan.temperature,
                pair.plan.max_attempts,
                parse_turn,
            )
            .await?;
        Ok(Turn {
            speaker,
            utterance,
            end,
        })
    }

    /// The observer's IPIP-50 report on the subject, given the relationship and every dialogue.
    async fn report(
        &self,
        pair: &Pair<'_>,
        relationship: &str,
        dialogues: &[(String, Vec<Turn>)],
    ) -> Result<Questionnaire, JudgeFailure> {
        let (s, o, who) = (pair.s, pair.o, pair.who);
        let transcript: Vec<String> = dialogues
            .iter()
            .enumerate()
            .map(|(i, (scenario, turns))| {
                let lines: Vec<String> = turns.iter().map(|t| pair.line(t)).collect();
                format!("Conversation {} — {scenario}\n{}", i + 1, lines.join("\n"))
            })
            .collect();
        let intro = format!(
            "{relationship}\n\nThese are your recent conversations with {}:\n\n{}\n\nFrom what you know of {} and what \
             you saw, rate how accurately each statement describes {}.",
            who.name,
            transcript.join("\n\n"),
            who.name,
            who.name
        );
        let system = format!(
            "{}\nYou are filling in a questionnaire about someone you know. Answer honestly, as yourself.",
            o.persona.system_prompt()
        );
        self.questionnaire(
            self.scale(),
            system,
            intro,
            format!("report {} {}", s.id, o.id),
            pair.seed("report"),
            &pair.asker(),
        )
        .await
    }

    /// A questionnaire every trait of which can be scored: at least half of each trait's items
    /// answered (as an interview's dimension is scored from the rest). One with a trait below that
    /// is a failure, said by trait and asked again whole by a resume, not a report of guesses.
    fn scorable(&self, (items, asked_again): Questionnaire) -> Result<Questionnaire, JudgeFailure> {
        let short = super::report::short_traits(self.scale(), &items);
        if short.is_empty() {
            return Ok((items, asked_again));
        }
        Err(JudgeFailure {
            attempts: 0,
            last: format!(
                "the replies were read, but fewer than half of the items of {} had a usable answer (left out: items {})",
                short.join(", "),
                self.left_out(&items).iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            ),
            cause: None,
        })
    }

    /// The questionnaire's items a report has no option for.
    fn left_out(&self, items: &BTreeMap<u32, ItemOption>) -> Vec<u32> {
        self.scale().scored_items().map(|i| i.id).filter(|id| !items.contains_key(id)).collect()
    }

    async fn self_report(
        &self,
        asker: &Asker<'_>,
        s: &SubjectSpec,
        who: &Who,
    ) -> Result<Questionnaire, JudgeFailure> {
        let (scale, plan) = (self.scale(), asker.plan);
        let seed = plan.seed ^ hash(&[&s.id, "self"]);
        let intro = "Rate how accurately each statement describes you, as you really are.".to_string();
        match plan.self_report {
            SelfReportMode::Batched => {
                self.questionnaire_with(
                    (self.subject_model.as_ref(), Role::Rpa),
                    scale,
                    who.system.clone(),
                    intro,
                    format!("self-report {}", s.id),
                    seed,
                    asker,
                    scale.scored_items().map(|i| i.id).collect(),
                )
                .await
            }
            SelfReportMode::Items => {
                let asks = scale.scored_items().map(|item| {
                    self.questionnaire_with(
                        (self.subject_model.as_ref(), Role::Rpa),
                        scale,
                        who.system.clone(),
                        intro.clone(),
                        format!("self-report {} item {}", s.id, item.id),
                        seed ^ u64::from(item.id),
                        asker,
                        vec![item.id],
                    )
                });
                // An item whose replies stayed unusable is left out, as in a batched self-report;
                // one whose request itself failed (the server) fails the self-report, to be asked
                // again on resume.
                let (mut items, mut asked_again) = (BTreeMap::new(), Vec::new());
                let mut unusable = None;
                for r in join_all(asks).await {
                    match r {
                        Ok((answered, again)) => {
                            items.extend(answered);
                            asked_again.extend(again);
                        }
                        Err(e) if e.cause.is_none() => unusable = Some(e),
                        Err(e) => return Err(e),
                    }
                }
                match (items.is_empty(), unusable) {
                    (true, Some(e)) => Err(e),
                    _ => Ok((items, asked_again)),
                }
            }
        }
    }

    async fn questionnaire(
        &self,
        scale: &Scale,
        system: String,
        intro: String,
        purpose: String,
        seed: u64,
        asker: &Asker<'_>,
    ) -> Result<Questionnaire, JudgeFailure> {
        let ids = scale.scored_items().map(|i| i.id).collect();
        self.questionnaire_with(
            (self.observer_model.as_ref(), Role::Observer),
            scale,
            system,
            intro,
            purpose,
            seed,
            asker,
            ids,
        )
        .await
    }

    /// IPIP statements as a JSON object keyed by item id; the reply maps each id to an option 1–5.
    /// One unusable item never voids the others: they are kept, and the unusable ones asked again on
    /// their own, once; an item still unusable then is left out (its trait scored from the rest, the
    /// journaled report without it).
    ///
    /// `who`: the model that answers, and its role (the subject's self-report is the role-play
    /// agent's, an observer's report the observer's).
    #[allow(clippy::too_many_arguments)]
    async fn questionnaire_with(
        &self,
        who: (&dyn ChatModel, Role),
        scale: &Scale,
        system: String,
        intro: String,
        purpose: String,
        seed: u64,
        asker: &Asker<'_>,
        ids: Vec<u32>,
    ) -> Result<Questionnaire, JudgeFailure> {
        let mut got = BTreeMap::new();
        let mut asked_again = Vec::new();
        let mut ids = ids;
        for round in 0..2u64 {
            let (purpose, seed) = match round {
                0 => (purpose.clone(), seed),
                _ => (format!("{purpose}, items asked again"), seed ^ 0x5EED),
            };
            let asked = self
                .items(who, scale, system.clone(), &intro, purpose, seed, asker, &ids)
                .await;
            let (good, bad) = match asked {
                Ok(answered) => answered,
                // The whole questionnaire failed, or the request itself did (not its replies):
                // a failure, asked again by a resume.
                Err(e) if round == 0 || e.cause.is_some() => return Err(e),
                Err(e) => {
                    tracing::warn!(items = ?ids, last = %e.last, "questionnaire items left out");
                    break;
                }
            };
            got.extend(good);
            if bad.is_empty() || round == 1 {
                break;
            }
            asked_again.clone_from(&bad);
            ids = bad;
        }
        Ok((got, asked_again))
    }

    /// One request for the items `ids`: the usable options, and the ids of the items that were not
    /// (a failure only when none was usable, after the bounded attempts).
    #[allow(clippy::too_many_arguments)]
    async fn items(
        &self,
        (model, role): (&dyn ChatModel, Role),
        scale: &Scale,
        system: String,
        intro: &str,
        purpose: String,
        seed: u64,
        asker: &Asker<'_>,
        ids: &[u32],
    ) -> Result<(BTreeMap<u32, ItemOption>, Vec<u32>), JudgeFailure> {
        let keys: Vec<String> = ids.iter().map(u32::to_string).collect();
        let statements: serde_json::Map<String, Value> = ids
            .iter()
            .filter_map(|id| scale.item(*id))
            .map(|i| (i.id.to_string(), Value::String(i.statement.en.clone())))
            .collect();
        let options: Vec<String> = scale
            .options
            .en
            .iter()
            .enumerate()
            .map(|(i, o)| format!("{} = {o}", scale.range.min + i as i32))
            .collect();
        let user = format!(
            "{intro}\nOptions: {}.\nStatements: {}\nReply as JSON with the same keys, each mapped to a number from {} to {}.",
            options.join(", "),
            Value::Object(statements),
            scale.range.min,
            scale.range.max
        );
        let mut schema_value = crate::method::convert::schema(&keys, scale.range);
        // A questionnaire about a person has no refusal option.
        for k in &keys {
            schema_value["properties"][k] =
                json!({"type": "integer", "minimum": scale.range.min, "maximum": scale.range.max});
        }
        let request = Self::request(system, user, role, purpose, seed, schema("ipip", schema_value));
        let range = scale.range;
        let parse = |r: &str| -> Result<(BTreeMap<u32, ItemOption>, Vec<u32>), ReplyError> {
            let v = judge_json::extract(r)?;
            let (got, unusable) = judge_json::some_options(&v, &keys, range)?;
            let mut good = BTreeMap::new();
            let mut bad: Vec<u32> = unusable.iter().filter_map(|(k, _)| k.parse().ok()).collect();
            for (k, o) in got {
                let Ok(id) = k.parse::<u32>() else { continue };
                match o {
                    ItemOption::Refused => bad.push(id),
                    o => {
                        good.insert(id, o);
                    }
                }
            }
            if good.is_empty() {
                return Err(ReplyError::Invalid(match unusable.first() {
                    Some((_, e)) => e.to_string(),
                    None => "every item needs a number, not x".into(),
                }));
            }
            bad.sort_unstable();
            Ok((good, bad))
        };
        self.json(asker, model, request, 0.0, asker.plan.max_attempts, parse).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_and_scenarios_parse_with_repairs_and_refuse_what_cannot_be_used() {
        assert_eq!(
            parse_turn("```json\n{\"utterance\": \"Hi!\", \"end\": \"false\",}\n```").unwrap(),
            ("Hi!".to_string(), false)
        );
        assert!(parse_turn("{\"utterance\": \"  \", \"end\": true}").is_err());
        // Invisible or control characters only: nothing said, asked again.
        assert!(parse_turn("{\"utterance\": \"\\u200b\\u200b\\ufeff\\u202e\", \"end\": true}").is_err());
        // A terminal's sequence says nothing either: no "[0m" is left of it to read.
        assert!(text_field(&serde_json::json!({"relationship": "\u{1b}[0m\u{7}"}), "relationship").is_err());
        assert!(text_field(&serde_json::json!({"relationship": "\u{3164}\u{2800}"}), "relationship").is_err());
        assert!(parse_turn("{\"utterance\": \"Hi\"}").is_err());
        assert_eq!(
            parse_scenarios("{\"scenarios\": [\"a\", \"b\", \"c\"]}", 2).unwrap(),
            ["a", "b"]
        );
        assert!(parse_scenarios("{\"scenarios\": [\"a\"]}", 2).is_err());
        // A wrong type is said as such, not as a missing key: the re-ask quotes this to the model.
        assert_eq!(
            parse_scenarios("{\"scenarios\": \"a, b\"}", 2).unwrap_err().to_string(),
            "\"scenarios\" must be a list of strings"
        );
        assert_eq!(
            parse_scenarios("{\"scenes\": [\"a\", \"b\"]}", 2).unwrap_err().to_string(),
            "key \"scenarios\" is missing"
        );
    }
}
