//! Synthetic personas: a latent Big-Five profile (levels 1–6 per trait) told through bipolar adjective
//! markers, with a name, age and gender drawn from a seed. The markers are this project's own list.

use serde::{Deserialize, Serialize};

use crate::domain::rng::SplitMix64;

/// The latent traits in the order of `--latent O,C,E,A,N`.
pub const TRAITS: [Trait; 5] = [
    Trait::Openness,
    Trait::Conscientiousness,
    Trait::Extraversion,
    Trait::Agreeableness,
    Trait::Neuroticism,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trait {
    Openness,
    Conscientiousness,
    Extraversion,
    Agreeableness,
    Neuroticism,
}

impl Trait {
    /// The IPIP-50 dimension that measures the trait, and whether it runs the other way (Emotional
    /// Stability is low Neuroticism).
    pub fn ipip(self) -> (&'static str, bool) {
        match self {
            Trait::Openness => ("Intellect/Imagination", false),
            Trait::Conscientiousness => ("Conscientiousness", false),
            Trait::Extraversion => ("Extraversion", false),
            Trait::Agreeableness => ("Agreeableness", false),
            Trait::Neuroticism => ("Emotional Stability", true),
        }
    }

    /// (low pole, high pole) adjective pairs.
    fn markers(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Trait::Openness => &[
                ("incurious", "curious"),
                ("unimaginative", "imaginative"),
                ("conventional", "unconventional"),
                ("uninterested in art", "artistic"),
                ("literal-minded", "reflective"),
                ("set in their ways", "open to new ideas"),
            ],
            Trait::Conscientiousness => &[
                ("disorganized", "organized"),
                ("careless", "careful"),
                ("unreliable", "dependable"),
                ("lazy", "hardworking"),
                ("impulsive", "deliberate"),
                ("messy", "tidy"),
            ],
            Trait::Extraversion => &[
                ("quiet", "talkative"),
                ("reserved", "outgoing"),
                ("timid", "bold"),
                ("solitary", "sociable"),
                ("subdued", "energetic"),
                ("unassertive", "assertive"),
            ],
            Trait::Agreeableness => &[
                ("cold", "warm"),
                ("critical", "forgiving"),
                ("suspicious", "trusting"),
                ("uncooperative", "cooperative"),
                ("stingy", "generous"),
                ("rude", "considerate"),
            ],
            Trait::Neuroticism => &[
                ("calm", "anxious"),
                ("relaxed", "tense"),
                ("even-tempered", "moody"),
                ("secure", "insecure"),
                ("unworried", "worrying"),
                ("steady", "easily upset"),
            ],
        }
    }
}

/// A level 1–6 as words: 1–3 lean to the low pole (very, plain, a bit), 4–6 to the high pole.
pub fn describe(t: Trait, level: u8) -> String {
    let level = level.clamp(1, 6);
    let modifier = match level {
        1 | 6 => "very ",
        3 | 4 => "a bit ",
        _ => "",
    };
    t.markers()
        .iter()
        .map(|(low, high)| format!("{modifier}{}", if level <= 3 { low } else { high }))
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Persona {
    pub name: String,
    pub age: u8,
    pub gender: String,
    /// Level 1–6 per trait, in [`TRAITS`] order.
    pub latent: [u8; 5],
}

const FIRST: [(&str, &str); 24] = [
    ("Ada", "woman"),
    ("Bruno", "man"),
    ("Chiara", "woman"),
    ("Dmitri", "man"),
    ("Esi", "woman"),
    ("Farid", "man"),
    ("Greta", "woman"),
    ("Hiro", "man"),
    ("Ines", "woman"),
    ("Jonas", "man"),
    ("Kalani", "woman"),
    ("Luca", "man"),
    ("Mei", "woman"),
    ("Nico", "man"),
    ("Oona", "woman"),
    ("Pavel", "man"),
    ("Rosa", "woman"),
    ("Sami", "man"),
    ("Tove", "woman"),
    ("Uriel", "man"),
    ("Vera", "woman"),
    ("Wen", "man"),
    ("Yara", "woman"),
    ("Zeno", "man"),
];

const LAST: [&str; 16] = [
    "Albers",
    "Brennan",
    "Castillo",
    "Dufour",
    "Eriksen",
    "Fontaine",
    "Gallo",
    "Haddad",
    "Ivanova",
    "Jensen",
    "Kowalski",
    "Lindqvist",
    "Moreau",
    "Nakamura",
    "Okafor",
    "Petrov",
];

impl Persona {
    /// A persona drawn from `rng`; `latent` fixed, or drawn uniformly from 1–6 per trait.
    pub fn draw(rng: &mut SplitMix64, latent: Option<[u8; 5]>) -> Persona {
        let (first, gender) = FIRST[rng.below(FIRST.len())];
        let last = LAST[rng.below(LAST.len())];
        let age = 15 + rng.below(66) as u8;
        let latent = latent.unwrap_or_else(|| std::array::from_fn(|_| 1 + rng.below(6) as u8));
        Persona {
            name: format!("{first} {last}"),
            age,
            gender: gender.to_string(),
            latent,
        }
    }

    /// "Ada Albers, a 34-year-old woman. Personality: very curious, …" — what the agent plays and
    /// what the other side is told about it.
    pub fn profile(&self) -> String {
        let traits: Vec<String> = TRAITS
            .iter()
            .zip(self.latent)
            .map(|(t, level)| describe(*t, level))
            .collect();
        format!(
            "{}, a {}-year-old {}. Personality: {}.",
            self.name,
            self.age,
            self.gender,
            traits.join("; ")
        )
    }

    /// The system prompt of the agent playing this persona.
    pub fn system_prompt(&self) -> String {
        format!(
            // The profile ends with its own full stop.
            "You are {} Live this personality in everything you say and do, without ever naming it or \
             describing yourself in these words. Speak in the first person, as yourself, in one to three sentences.",
            self.profile()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_read_as_graded_markers() {
        assert!(describe(Trait::Extraversion, 1).starts_with("very quiet, very reserved"));
        assert!(describe(Trait::Extraversion, 3).starts_with("a bit quiet"));
        assert!(describe(Trait::Extraversion, 5).starts_with("talkative, outgoing"));
        assert!(describe(Trait::Neuroticism, 6).contains("very anxious"));
        for t in TRAITS {
            assert!(t.markers().len() >= 5);
        }
    }

    #[test]
    fn personas_are_seeded() {
        let a = Persona::draw(&mut SplitMix64(7), None);
        let b = Persona::draw(&mut SplitMix64(7), None);
        assert_eq!(a, b);
        assert!((15..=80).contains(&a.age));
        assert!(a.latent.iter().all(|l| (1..=6).contains(l)));
        let fixed = Persona::draw(&mut SplitMix64(7), Some([1, 4, 2, 1, 2]));
        assert_eq!(fixed.latent, [1, 4, 2, 1, 2]);
        assert!(fixed.profile().contains("very incurious"));
    }
}
