//! The injection detector's cue words: which lowercase, accent-folded word is which
//! [`Cue`], as data in `lists/cue_words.txt` (a `[Name]` line starts the words of
//! `Cue::Name`). Words are matched whole ([`super::injection::cue`]); harm words of 7
//! letters or more also one typo away ([`super::injection::misspelt_harm`]).

use std::sync::OnceLock;

use super::Cue;
use crate::text::lexicon;

/// The cue word list, read at compile time.
const CUE_WORDS: &str = include_str!("lists/cue_words.txt");

/// Every `(cue, word)` of the list, in the list's order (every other word is `Cue::Other`).
/// A section whose name is no [`Cue`] is skipped; a test checks that there is none.
pub(super) fn cue_words() -> &'static [(Cue, &'static [u8])] {
    static WORDS: OnceLock<Vec<(Cue, &'static [u8])>> = OnceLock::new();
    WORDS.get_or_init(|| {
        lexicon::list_sections(CUE_WORDS)
            .filter_map(|(section, w)| Some((Cue::from_section(section)?, w.as_bytes())))
            .collect()
    })
}

impl Cue {
    /// The cue a section of the cue word list names (its variant's name).
    pub(super) fn from_section(name: &str) -> Option<Cue> {
        Some(match name {
            "Drop" => Cue::Drop,
            "Previous" => Cue::Previous,
            "Rules" => Cue::Rules,
            "Orders" => Cue::Orders,
            "You" => Cue::You,
            "Are" => Cue::Are,
            "YouAre" => Cue::YouAre,
            "Longer" => Cue::Longer,
            "Fiction" => Cue::Fiction,
            "Scenario" => Cue::Scenario,
            "Start" => Cue::Start,
            "Response" => Cue::Response,
            "Now" => Cue::Now,
            "New" => Cue::New,
            "From" => Cue::From,
            "On" => Cue::On,
            "Act" => Cue::Act,
            "As" => Cue::As,
            "Pretend" => Cue::Pretend,
            "Role" => Cue::Role,
            "Play" => Cue::Play,
            "ModeName" => Cue::ModeName,
            "Mode" => Cue::Mode,
            "Unbound" => Cue::Unbound,
            "Do" => Cue::Do,
            "Anything" => Cue::Anything,
            "Without" => Cue::Without,
            "Stay" => Cue::Stay,
            "In" => Cue::In,
            "Character" => Cue::Character,
            "System" => Cue::System,
            "Reveal" => Cue::Reveal,
            "Your" => Cue::Your,
            "Task" => Cue::Task,
            "Tasked" => Cue::Tasked,
            "A" => Cue::A,
            "PersonaVerb" => Cue::PersonaVerb,
            "Purely" => Cue::Purely,
            "For" => Cue::For,
            "Educational" => Cue::Educational,
            "Purposes" => Cue::Purposes,
            "Imagine" => Cue::Imagine,
            "Never" => Cue::Never,
            "Refuse" => Cue::Refuse,
            "Disclaimer" => Cue::Disclaimer,
            "Say" => Cue::Say,
            "Write" => Cue::Write,
            "Ask" => Cue::Ask,
            "AskMake" => Cue::AskMake,
            "Make" => Cue::Make,
            "Explain" => Cue::Explain,
            "Learn" => Cue::Learn,
            "List" => Cue::List,
            "Sure" => Cue::Sure,
            "Help" => Cue::Help,
            "Please" => Cue::Please,
            "Me" => Cue::Me,
            "How" => Cue::How,
            "To" => Cue::To,
            "Agent" => Cue::Agent,
            "Modal" => Cue::Modal,
            "Way" => Cue::Way,
            "What" => Cue::What,
            "Guide" => Cue::Guide,
            "Harm" => Cue::Harm,
            "HarmMade" => Cue::HarmMade,
            "HarmVerb" => Cue::HarmVerb,
            "Hack" => Cue::Hack,
            "Thing" => Cue::Thing,
            "Exploit" => Cue::Exploit,
            "Weakness" => Cue::Weakness,
            "Launder" => Cue::Launder,
            "Money" => Cue::Money,
            "Evade" => Cue::Evade,
            "Avoid" => Cue::Avoid,
            "Evasion" => Cue::Evasion,
            "Pursuit" => Cue::Pursuit,
            "Tax" => Cue::Tax,
            "Detection" => Cue::Detection,
            "Caught" => Cue::Caught,
            "Knowing" => Cue::Knowing,
            "Trace" => Cue::Trace,
            "SelfWord" => Cue::SelfWord,
            "Hurt" => Cue::Hurt,
            "Safe" => Cue::Safe,
            "Det" => Cue::Det,
            "Words" => Cue::Words,
            _ => return None,
        })
    }
}

#[cfg(test)]
pub(super) fn sections() -> impl Iterator<Item = &'static str> {
    lexicon::list_sections(CUE_WORDS).map(|(section, _)| section)
}
