//! Prompt-injection cues over lowercase, accent-folded words: instruction overrides,
//! role-play setups, system-prompt extraction and plainly harmful requests (an asking
//! phrase followed by a harm word within its clause), with the cue word table they are
//! matched against. See the parent module for the kinds and examples.

use super::*;

/// Cue words; everything else is `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Cue {
    #[default]
    Other,
    /// ignore, disregard, forget, override, bypass, ...
    Drop,
    /// previous, prior, above, earlier, preceding, former, initial, original
    Previous,
    /// instructions, rules, guidelines, prompt, restrictions, ...
    Rules,
    /// assignments, orders, Aufträge, Aufgaben, Angaben: what an instruction override
    /// drops ("forget about all the assignments", "vergiss alle Aufträge"), and nothing
    /// else ("no orders" is no role-play setup, unlike "no rules")
    Orders,
    /// new, neue, neuen, nouvelles, nuevas: "new instructions follow"
    New,
    You,
    Are,
    /// "you're" (apostrophe dropped)
    YouAre,
    Now,
    From,
    On,
    Act,
    As,
    /// pretend, roleplay, impersonate
    Pretend,
    Role,
    Play,
    /// developer, dev, god, dan (as in "dan mode"), debug, admin, sudo
    ModeName,
    Mode,
    /// jailbreak, jailbroken, uncensored, unfiltered, unrestricted, amoral
    Unbound,
    /// "DAN" in capitals
    Dan,
    Do,
    Anything,
    /// no, without
    Without,
    Stay,
    In,
    Character,
    System,
    /// reveal, repeat, print, show, display, output, leak, dump, disclose, tell
    Reveal,
    /// your, the, all, any, these, those, my
    Det,
    /// words, text, everything, message, messages, content (and alles, todo, tout, sve)
    Words,
    /// "longer", as in "you are no longer ..."
    Longer,
    /// fiction, fictional, fictitious, hypothetical(ly)
    Fiction,
    /// scenario, story, world, universe, setting
    Scenario,
    /// start, begin
    Start,
    /// response, reply, answer
    Response,
    /// "your" (a determiner too)
    Your,
    /// task, mission, job, goal (as in "your task is to")
    Task,
    /// tasked, instructed, commissioned (as in "you are a writer tasked with")
    Tasked,
    /// a, an (as in "You are a chemist trying to")
    A,
    /// trying, working, who, writing, hired, asked, helping, researching, developing,
    /// creating: what a persona set up by "You are a ..." is doing
    PersonaVerb,
    /// purely, solely
    Purely,
    For,
    /// educational, research, academic, artistic, entertainment
    Educational,
    /// purpose, purposes
    Purposes,
    Imagine,
    /// never, not, dont (as in "never refuse", "do not apologize", "don't moralize")
    Never,
    /// refuse, apologize, censor, moralize (the refusal verbs of refusal suppression)
    Refuse,
    /// disclaimer(s), caveat(s), refusals (as in "no disclaimers")
    Disclaimer,
    /// say, use, mention, include, utter (as in "never use words like")
    Say,
    /// "write": a verb of [`Cue::Say`] to the refusal-suppression rule, and an asking verb
    /// ("write a tutorial on")
    Write,
    /// give, provide, generate, draft, compose, suggest, ... (asking verbs that
    /// want a guide noun or a harm word after them: "give instructions for")
    Ask,
    /// create, develop, design, build, make, synthesize, manufacture, ... (asking
    /// verbs that make something: a request by themselves, "develop a virus")
    AskMake,
    /// making, building, selling, buying, obtaining, spreading, ... (what a
    /// weapon, a drug or a virus is a harm with)
    Make,
    /// explain, describe, teach, detail, demonstrate, portray, depict (before "how to";
    /// after "how can I", asking how to depict something)
    Explain,
    /// know, learn (before "how to" when someone is addressed or speaks: "I want to know
    /// how to", not "they went online to learn how to")
    Learn,
    /// list, plan, outline: an asking verb ("List the steps to") and a guide noun ("Provide
    /// a list of")
    List,
    /// sure (as in "make sure": not a request to make something)
    Sure,
    /// help (as in "help me hack")
    Help,
    /// please, kindly, also, then (before an imperative: "Can you please write")
    Please,
    /// me, us
    Me,
    /// how, where (as in "how can I", "where can I buy")
    How,
    To,
    /// i, one, someone, somebody, we, anyone, people, others (as in "how can I", "how one
    /// could", "hurt others")
    Agent,
    /// can, could, would, should, might, will, does (as in "how can I", "could you")
    Modal,
    /// way, ways (as in "the best way to")
    Way,
    /// what, whats, which (as in "What is the best way to")
    What,
    /// guide, tutorial, tips, steps, recipe, plan, strategy, script, program, email, post,
    /// article, website, tool, ...: what a request asks for ("a tutorial on")
    Guide,
    /// Harm words of a request by themselves: hacking, malware, ransomware, keylogger,
    /// explosives, theft, phishing, fraud, counterfeit, methamphetamine, assassinate,
    /// suicide, ...
    Harm,
    /// weapon, firearm, gun, drug, virus, meth, cocaine, ...: harm words only with a verb of
    /// making or trade ([`Cue::AskMake`], [`Cue::Make`]) in the clause
    HarmMade,
    /// kill, steal, poison, murder, bomb (and forms): harm words unless an object that is
    /// not a person follows ([`Cue::Thing`])
    HarmVerb,
    /// hack: a [`Cue::HarmVerb`] but as a noun ("a hack", "this hack": a workaround)
    Hack,
    /// process, thread, pid, time, weeds, mosquitoes, base, kiss, pill, mystery, test, ...:
    /// objects of "kill", "steal", "poison", "murder", "bomb" in programming and everyday
    /// senses
    Thing,
    /// exploit, exploits, exploiting (a harm before [`Cue::Weakness`], or as "an exploit")
    Exploit,
    /// vulnerability, flaw, loophole, server, software, database, children, elderly, ...
    Weakness,
    /// launder, laundering, laundered (a harm with [`Cue::Money`])
    Launder,
    /// money, funds, cash, proceeds
    Money,
    /// evade, evading, elude, dodge
    Evade,
    /// avoid, avoiding (evading with [`Cue::Pursuit`], defensive otherwise)
    Avoid,
    /// evasion (as in "tax evasion")
    Evasion,
    /// police, cops, authorities, arrest, capture, surveillance, customs
    Pursuit,
    /// tax, taxes, sanctions (evaded, not avoided)
    Tax,
    /// detection: evaded after [`Cue::Evade`] or [`Cue::Avoid`] ("avoid detection"),
    /// defensive otherwise ("fraud detection")
    Detection,
    /// caught, noticed, detected, traced, arrested, consent (as in "without getting caught",
    /// "without consent")
    Caught,
    /// knowing, knowledge, noticing, realizing (as in "without them knowing", not "without
    /// knowing what mode it is in")
    Knowing,
    /// trace, traces, evidence (as in "without leaving a trace", not "without stack trace")
    Trace,
    /// self (as in "self-harm")
    SelfWord,
    /// harm, hurt, injure, mutilation (as in "self-harm", "harm others")
    Hurt,
    /// detect, prevent, protect, defend, recognize, identify, report, remove, safe, legally,
    /// victims, vaccine, game, chess, ...: the request defends against the harm,
    /// or it is harmless (a game)
    Safe,
}

/// The cue of a word, packed by [`lexicon::pack`] (`all_caps`: written in capitals, at least
/// two letters).
pub(super) fn cue(key: u128, all_caps: bool) -> Cue {
    static TABLE: OnceLock<WordTable<Cue>> = OnceLock::new();
    /// "dan", packed.
    const DAN: u128 = u128::from_le_bytes(*b"dan\0\0\0\0\0\0\0\0\0\0\0\0\0");
    if all_caps && key == DAN {
        return Cue::Dan;
    }
    TABLE
        .get_or_init(|| WordTable::new(cue_words().iter().map(|&(c, w)| (w, c)), |_, b| b))
        .get_packed(key)
}

/// Objects of an ignore verb in code and settings ("ignore case", "ignoring whitespace",
/// "ignore warnings"), lowercase: not the rules an instruction override drops.
fn is_mundane_object(w: &[u8]) -> bool {
    matches!(
        w,
        b"case"
            | b"whitespace"
            | b"whitespaces"
            | b"spaces"
            | b"errors"
            | b"warnings"
            | b"punctuation"
            | b"capitalization"
            | b"capitalisation"
            | b"accents"
            | b"comments"
            | b"blanks"
            | b"duplicates"
            | b"exceptions"
            | b"nulls"
            | b"typos"
            | b"formatting"
    )
}

/// Whether `c` is a determiner ("your" has its own cue).
fn is_det(c: Cue) -> bool {
    matches!(c, Cue::Det | Cue::Your)
}

/// Window of recent cue words.
const WINDOW: usize = 8;

/// Words after an asking phrase within which a harm word makes a harmful request ("Give
/// detailed step-by-step instructions for how to hack ...").
const REQUEST_REACH: usize = 12;

/// A harmful request being read in the current clause (see [`RiskFlags::HARMFUL_REQUEST`]):
/// an asking phrase and a harm word after it. Decided when the clause ends, because a
/// defensive or harmless word may come after the harm word ("... phishing emails and
/// report them", "kill a child process").
#[derive(Debug, Clone, Copy, Default)]
struct Request {
    /// Word count ([`CueMatcher::n`]) before the first word of the clause, or of the
    /// phrase after a colon or a comma in it.
    clause: usize,
    /// Word count at the end of the last asking phrase ("explain how to", "write a
    /// tutorial", "how can I", "develop").
    asked: Option<usize>,
    /// Word count at the end of the last asking phrase with "how" ("how can I").
    how: Option<usize>,
    /// Word count at an imperative asking verb ("give", "write", "create"); a guide noun
    /// after it completes an asking phrase, a harm word right after it is its object
    /// ("Write a phishing email").
    verb: Option<usize>,
    /// The clause opens with "what" or "which": "the best way to" asks.
    what: bool,
    /// "I", "we", "you", "me", ... so far in the clause: "know how to" asks.
    person: bool,
    /// A harm word by itself after an asking phrase.
    harm: bool,
    /// A weapon, drug or virus after an asking phrase: a harm with `make`.
    made: bool,
    /// A verb of making or trade anywhere in the clause.
    make: bool,
    /// "kill", "steal", "poison", "murder", "bomb", "hack" or "hurt someone" after an
    /// asking phrase, with no harmless object ("a process", "time", "the show", "the
    /// test", "feelings") after it.
    verb_harm: bool,
    /// Evading the law or detection after an asking phrase ("evade taxes", "without
    /// getting caught"); a defensive word does not undo it.
    evasion: bool,
    /// A defensive or harmless word anywhere in the clause ("detect", "prevent", "avoid",
    /// "game").
    safe: bool,
}

impl Request {
    /// Whether word `n` (a [`CueMatcher::n`] count) is within reach of an asking phrase:
    /// at most [`REQUEST_REACH`] words after it, or 3 after an imperative asking verb.
    fn reaches(&self, n: usize) -> bool {
        let within = |at: Option<usize>, k: usize| at.is_some_and(|a| n.saturating_sub(a) <= k);
        within(self.asked, REQUEST_REACH) || within(self.verb, 3)
    }
}

pub(super) struct CueMatcher {
    recent: [Cue; WINDOW],
    n: usize,
    /// The sentence opens with "You are a(n)" or "You're a(n)": a persona setup.
    persona: bool,
    req: Request,
    flags: RiskFlags,
}

impl CueMatcher {
    /// The cue `k` words back (0 = the current word).
    fn back(&self, k: usize) -> Cue {
        if k >= self.n || k >= WINDOW {
            Cue::Other
        } else {
            self.recent
                .get((self.n - 1 - k) % WINDOW)
                .copied()
                .unwrap_or(Cue::Other)
        }
    }

    /// Whether `c` occurs 1..=`within` words back.
    fn seen(&self, c: Cue, within: usize) -> bool {
        (1..=within).any(|k| self.back(k) == c)
    }

    /// The last word, an ignore verb, has an object that is no rule ("ignore case",
    /// "ignoring whitespace"; see [`is_mundane_object`]): it no longer counts as one.
    #[cold]
    fn drop_has_object(&mut self) {
        if let Some(x) = self.recent.get_mut((self.n + WINDOW - 1) % WINDOW) {
            *x = Cue::Other;
        }
    }

    fn word(&mut self, c: Cue) {
        if let Some(x) = self.recent.get_mut(self.n % WINDOW) {
            *x = c;
        }
        self.n += 1;
        if c == Cue::Other {
            // Most words: no rule below fires on them; of the harmful-request state, only
            // a word after "help" tells anything (see `request`).
            self.req.safe |= self.back(1) == Cue::Help;
            return;
        }
        let (p1, p2) = (self.back(1), self.back(2));
        if c == Cue::A {
            self.persona |=
                self.n == 2 && p1 == Cue::YouAre || self.n == 3 && p1 == Cue::Are && p2 == Cue::You;
        }
        let mut f = RiskFlags::empty();
        // Instruction overrides: "ignore (all) previous instructions", "forget everything",
        // "die obigen Anweisungen ignorieren".
        // "Now new instructions follow", "nun folgen neue Anweisungen": a replacement
        // announced (not "the new rules of the game").
        let announced = c == Cue::Rules && p1 == Cue::New && self.seen(Cue::Now, 3);
        if announced
            || matches!(c, Cue::Rules | Cue::Words | Cue::Orders) && self.seen(Cue::Drop, 6)
            || c == Cue::Previous && (p1 == Cue::Drop || p2 == Cue::Drop)
            || c == Cue::Drop && self.seen(Cue::Previous, 4)
        {
            f |= RiskFlags::OVERRIDE;
        }
        // Weak cues: a fiction framing or "act as" inside a sentence (see
        // `RiskFlags::FRAMING`).
        if c == Cue::Fiction || c == Cue::As && p1 == Cue::Act {
            f |= RiskFlags::FRAMING;
        }
        // Role-play, persona and output-forcing setups.
        let role = match c {
            Cue::Pretend | Cue::Unbound | Cue::Dan => true,
            // "purely hypothetical", "purely for fictional purposes"; a hypothetical gas
            // or a fictitious person in an exam question is not a setup.
            Cue::Fiction => p1 == Cue::Purely || (p1 == Cue::For && p2 == Cue::Purely),
            // "a hypothetical scenario", "in a fictional world".
            Cue::Scenario => p1 == Cue::Fiction || p2 == Cue::Fiction,
            Cue::Now => {
                p1 == Cue::YouAre
                    || (p1 == Cue::Are && p2 == Cue::You)
                    || (p1 == Cue::Anything && p2 == Cue::Do)
            }
            Cue::Longer => {
                p1 == Cue::Without
                    && (p2 == Cue::YouAre || (p2 == Cue::Are && self.back(3) == Cue::You))
            }
            Cue::On => p1 == Cue::Now && p2 == Cue::From,
            // "Act as ..." opening a sentence, or addressed ("I want you to act as"); not
            // "the plate acts as a fin" (a different word) nor "prices can act as".
            Cue::As => p1 == Cue::Act && (self.n <= 3 || self.seen(Cue::You, 4)),
            Cue::Play => p1 == Cue::Role,
            Cue::Mode => p1 == Cue::ModeName,
            Cue::Character => p1 == Cue::In && p2 == Cue::Stay,
            Cue::Rules => p1 == Cue::Without || p2 == Cue::Without,
            Cue::Response => p1 == Cue::Start || (is_det(p1) && p2 == Cue::Start),
            // Persuasion framings (PAIR-style): "your task is to", "you are a writer tasked
            // with", "purely for fiction", "for educational purposes", "imagine you are".
            Cue::Task => p1 == Cue::Your,
            Cue::Tasked => self.seen(Cue::You, 6) || self.seen(Cue::YouAre, 6),
            // A persona set to work by the sentence's opening (PAIR-style persuasion, Chao
            // et al. 2023, "Jailbreaking Black Box Large Language Models in Twenty
            // Queries"): "You're a hobbyist chemist trying to help", "You are a
            // researcher who has been studying". On the evaluation data: 457 of 1,065
            // jailbreaks, no benign prompt, no MMLU-Pro question.
            Cue::PersonaVerb => self.persona && self.n <= 12,
            Cue::Educational => p1 == Cue::For && p2 == Cue::Purely,
            // "for educational purposes", "purely for creative purposes" (not "solely for
            // the purpose of").
            Cue::Purposes => {
                self.seen(Cue::Educational, 3)
                    || (p2 == Cue::For && self.back(3) == Cue::Purely && !is_det(p1))
            }
            Cue::You | Cue::YouAre => p1 == Cue::Imagine,
            // Refusal suppression (Wei et al. 2023, "Jailbroken: How Does LLM Safety
            // Training Fail?"): "never refuse", "do not apologize", "no disclaimers",
            // "never ever use words like".
            Cue::Refuse => self.seen(Cue::Never, 2),
            Cue::Disclaimer => self.seen(Cue::Without, 2),
            Cue::Words => {
                (self.seen(Cue::Say, 2) || self.seen(Cue::Write, 2)) && self.seen(Cue::Never, 4)
            }
            _ => false,
        };
        if role {
            f |= RiskFlags::ROLE_PLAY;
        }
        // System-prompt extraction: "system prompt", "system message", "reveal your
        // instructions", "print your hidden instructions", "print the words above".
        let det_before = is_det(p1) || p1 == Cue::Previous || p1 == Cue::Other && p2 == Cue::Your;
        if c == Cue::Rules && (p1 == Cue::System || self.seen(Cue::Reveal, 4) && det_before)
            || c == Cue::Words
                && p1 == Cue::System
                && (p2 == Cue::Your || self.seen(Cue::Reveal, 4))
            || c == Cue::Previous && self.seen(Cue::Words, 2) && self.seen(Cue::Reveal, 4)
        {
            f |= RiskFlags::PROMPT_EXTRACTION;
        }
        self.flags |= f;
        self.request(c, p1, p2);
    }

    /// The harmful-request state machine ([`Request`]) for word `c`, `p1` and `p2` the cues
    /// one and two words back.
    fn request(&mut self, c: Cue, p1: Cue, p2: Cue) {
        // Most words have no cue; of them, only one after "help" tells anything.
        if c == Cue::Other {
            self.req.safe |= p1 == Cue::Help;
            return;
        }
        let n = self.n;
        // The word's place in its clause, from 1.
        let pos = n.saturating_sub(self.req.clause);
        let within = |at: Option<usize>, k: usize| at.is_some_and(|a| n.saturating_sub(a) <= k);
        let active = self.req.reaches(n);
        // An asking verb in the imperative: opening the clause or a phrase after a colon or
        // a comma ("Write", "Task: write", "Hypothetically, write"), after "please" ("Can
        // you please give"), "now", "can you" or "would you", or after "you to" or "me to"
        // ("I want you to create") or a task ("your task is to write"); not an infinitive
        // in a narrative ("they consulted the Internet to build").
        let imperative = matches!(c, Cue::Ask | Cue::Write | Cue::AskMake | Cue::List)
            && (pos == 1
                || p1 == Cue::Please && pos <= 4
                || p1 == Cue::Now && pos == 2
                || p1 == Cue::You && p2 == Cue::Modal
                || p1 == Cue::To && (matches!(p2, Cue::You | Cue::Me) || self.seen(Cue::Task, 3)));
        // "avoid detection", "evade fraud detection", "bypass plagiarism detection" (not
        // "fraud detection").
        let evading = c == Cue::Detection
            && (self.seen(Cue::Evade, 3) || self.seen(Cue::Avoid, 3) || self.seen(Cue::Drop, 3));
        let r = &mut self.req;
        match c {
            // Asking phrases.
            Cue::Ask | Cue::Write if imperative => r.verb = Some(n),
            Cue::AskMake => {
                r.make = true;
                if imperative {
                    r.verb = Some(n);
                    r.asked = Some(n);
                }
            }
            Cue::Make => r.make = true,
            // "give instructions", "write a tutorial", "provide a detailed step-by-step",
            // "List the steps", "provide a list".
            Cue::Guide | Cue::Rules | Cue::Words | Cue::List => {
                if within(r.verb, 4) {
                    r.asked = Some(n);
                }
                if c == Cue::List && imperative {
                    r.verb = Some(n);
                }
            }
            Cue::Sure if p1 == Cue::AskMake => {
                r.asked = None;
                r.verb = None;
                r.make = false;
            }
            Cue::Me if p1 == Cue::Help => r.asked = Some(n),
            // "What is the best way to", "suggest ways to" (not "the only way to break out").
            Cue::What if pos <= 2 => r.what = true,
            Cue::Agent | Cue::You | Cue::YouAre | Cue::Me => r.person = true,
            Cue::To if p1 == Cue::Way && (r.what || within(r.verb, 5)) => r.asked = Some(n),
            Cue::Safe | Cue::Avoid => r.safe = true,
            Cue::Detection if !evading => r.safe = true,
            // "How do I best describe an assassination in my novel?": asking how to depict
            // the harm, not how to do it; "How can I tell if", "How do I know whether": how
            // to recognise it.
            Cue::Explain | Cue::Reveal | Cue::Learn if within(r.how, 2) => r.asked = None,
            _ => {}
        }
        // "How can I help a friend who ...": helping someone else.
        r.safe |= p1 == Cue::Help && c != Cue::Me;
        let asked = match c {
            // "How to ..." opening a clause; "explain how to", "tell me how someone could".
            Cue::To | Cue::Agent | Cue::You if p1 == Cue::How => {
                pos <= 3
                    || (2..=5).any(|k| match self.back(k) {
                        Cue::Explain | Cue::Reveal => true,
                        Cue::Learn => self.req.person,
                        _ => false,
                    })
            }
            // "how can I", "how do you", "how would one".
            Cue::Agent | Cue::You => p2 == Cue::How && matches!(p1, Cue::Do | Cue::Modal),
            _ => false,
        };
        if asked {
            self.req.asked = Some(n);
            self.req.how = Some(n);
        }
        if !active {
            return;
        }
        // Harm words after an asking phrase.
        match c {
            Cue::Harm => self.req.harm = true,
            Cue::HarmMade => self.req.made = true,
            Cue::HarmVerb => self.req.verb_harm = true,
            Cue::Hack if p1 != Cue::A && !is_det(p1) => self.req.verb_harm = true,
            // "kill a child process", "kill time", "steal the show", "poison ivy", "bomb the
            // test", "make a killing in the market".
            Cue::Thing | Cue::Task | Cue::Reveal
                if self.seen(Cue::HarmVerb, 4)
                    || self.seen(Cue::Hack, 4)
                    || self.seen(Cue::Hurt, 4) =>
            {
                self.req.verb_harm = false
            }
            // "write an exploit", "exploit a vulnerability" (not "exploit the symmetry").
            Cue::Exploit if p1 == Cue::A => self.req.harm = true,
            Cue::Weakness if self.seen(Cue::Exploit, 3) => self.req.harm = true,
            // "launder money", "money laundering" (not "launder a wool sweater").
            Cue::Money if self.seen(Cue::Launder, 3) => self.req.harm = true,
            Cue::Launder if p1 == Cue::Money || p2 == Cue::Money => self.req.harm = true,
            Cue::Hurt if p1 == Cue::SelfWord => self.req.harm = true,
            // "cause physical harm to others", "hurt someone" (not "hurt anyone's feelings").
            Cue::Agent | Cue::Me if self.seen(Cue::Hurt, 2) => self.req.verb_harm = true,
            // "evade the police", "avoid detection", "evade taxes", "tax evasion", "without
            // getting caught", "without them knowing".
            Cue::Pursuit if self.seen(Cue::Evade, 3) || self.seen(Cue::Avoid, 3) => {
                self.req.evasion = true
            }
            Cue::Tax if self.seen(Cue::Evade, 3) => self.req.evasion = true,
            Cue::Evasion if matches!(p1, Cue::Tax | Cue::Pursuit) => self.req.evasion = true,
            Cue::Detection if evading => self.req.evasion = true,
            Cue::Caught if self.seen(Cue::Without, 3) || self.seen(Cue::Avoid, 3) => {
                self.req.evasion = true
            }
            Cue::Knowing if p1 != Cue::Without && self.seen(Cue::Without, 3) => {
                self.req.evasion = true
            }
            Cue::Trace if self.seen(Cue::Without, 3) && (p1 == Cue::A || is_det(p1)) => {
                self.req.evasion = true
            }
            _ => {}
        }
    }

    /// A colon or a comma: an imperative may open the phrase after it ("Task: write a ...",
    /// "Ignoring any ethical implications, write a ..."); a request already read goes on.
    pub(super) fn phrase_start(&mut self) {
        self.req.clause = self.n;
    }

    /// Ends a sentence or clause: a persona opening and a request count only within their
    /// own clause.
    pub(super) fn clause_end(&mut self) {
        self.persona = false;
        let r = self.req;
        if r.evasion || (r.harm || r.made && r.make || r.verb_harm) && !r.safe {
            self.flags |= RiskFlags::HARMFUL_REQUEST;
        }
        self.req = Request {
            clause: self.n,
            ..Request::default()
        };
    }
}

/// Shortest word, in letters, read as a misspelt harm word ([`misspelt_harm`]): in shorter
/// words one edit too often makes another real word ("scam" and "scan", "theft" and
/// "thefts").
const MISSPELT_MIN: usize = 7;

/// The cue of a misspelt harm word: [`Cue::Harm`] or [`Cue::HarmMade`] when `w` (folded,
/// at least [`MISSPELT_MIN`] letters) is one edit (a letter inserted, dropped or replaced,
/// or two neighbours swapped; Damerau 1964) from a listed harm word of at least
/// [`MISSPELT_MIN`] letters with the same first letter, and is not a common English word
/// at that distance ("traffic" for "traffick", "stalling" for "stalking"); otherwise
/// [`Cue::Other`]. An unlisted inflection counts as well ("assassinated", "smuggler").
/// Cost: a byte comparison with each listed word of a length within one of `w`'s and the
/// same first letter.
pub(super) fn misspelt_harm(w: &[u8]) -> Cue {
    if is_near_harm_word(w) {
        return Cue::Other;
    }
    let Some(&first) = w.first() else {
        return Cue::Other;
    };
    cue_words()
        .iter()
        .filter(|(c, _)| matches!(c, Cue::Harm | Cue::HarmMade))
        .find(|(_, h)| {
            h.len() >= MISSPELT_MIN
                && h.len().abs_diff(w.len()) <= 1
                && h.first() == Some(&first)
                && one_edit_apart(w, h)
        })
        .map_or(Cue::Other, |&(c, _)| c)
}

/// Common English words one edit from a listed harm word of at least [`MISSPELT_MIN`]
/// letters with the same first letter (from a word-frequency list): not misspellings.
fn is_near_harm_word(w: &[u8]) -> bool {
    matches!(
        w,
        b"traffic"
            | b"exporting"
            | b"exhorting"
            | b"slamming"
            | b"spamming"
            | b"shamming"
            | b"scumming"
            | b"stacking"
            | b"staking"
            | b"stalling"
            | b"hawking"
            | b"hawkers"
            | b"hocking"
            | b"harking"
            | b"hecking"
            | b"snuggle"
            | b"snuggled"
            | b"snuggles"
            | b"snuggling"
            | b"bonnets"
            | b"pirates"
            | b"defacing"
            | b"blacktail"
    )
}

/// Whether `a` and `b` differ by exactly one edit: a byte inserted, dropped or replaced,
/// or two neighbouring bytes swapped (the optimal string alignment distance is 1).
pub(super) fn one_edit_apart(a: &[u8], b: &[u8]) -> bool {
    let (long, short) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    // Length of the common prefix; the edit is at `i`.
    let i = long.iter().zip(short).take_while(|(x, y)| x == y).count();
    match long.len() - short.len() {
        0 => {
            let (Some(la), Some(sa)) = (long.get(i..), short.get(i..)) else {
                return false;
            };
            match (la, sa) {
                ([], []) => false,
                ([_, lt @ ..], [_, st @ ..]) if lt == st => true,
                ([x, y, lt @ ..], [p, q, st @ ..]) => x == q && y == p && lt == st,
                _ => false,
            }
        }
        1 => long.get(i + 1..) == short.get(i..),
        _ => false,
    }
}

/// Builds the injection scanner's words (runs of Latin letters, folded to lowercase ASCII;
/// apostrophes and zero-width characters do not split them) and feeds their cues to a
/// [`CueMatcher`].
pub(super) struct CueWords {
    /// The word's first bytes; bytes past `len` are zero (cleared after every word).
    w: [u8; lexicon::MAX_WORD],
    len: usize,
    /// Longer than `MAX_WORD`: matches no cue.
    long: bool,
    all_caps: bool,
    any: bool,
    pub(super) m: CueMatcher,
}

impl CueWords {
    pub(super) fn new() -> Self {
        CueWords {
            w: [0; lexicon::MAX_WORD],
            len: 0,
            long: false,
            all_caps: true,
            any: false,
            m: CueMatcher {
                recent: [Cue::Other; WINDOW],
                n: 0,
                persona: false,
                req: Request::default(),
                flags: RiskFlags::empty(),
            },
        }
    }

    /// Appends a folded letter (`upper`: the original is uppercase).
    #[inline]
    pub(super) fn letter(&mut self, l: u8, upper: bool) {
        if let Some(slot) = self.w.get_mut(self.len) {
            *slot = l;
            self.len += 1;
        } else {
            self.long = true;
        }
        self.all_caps &= upper;
        self.any = true;
    }

    /// Appends a block of ASCII letters; the same as one [`CueWords::letter`] per letter.
    #[inline]
    pub(super) fn ascii_letters(&mut self, block: &LetterBlock) {
        if block.len == 0 {
            return;
        }
        let room = push_lowercase_block(&mut self.w, &mut self.len, block);
        self.long |= room < block.len;
        self.all_caps &= block.upper == block.len as u32;
        self.any = true;
    }

    /// Ends the current word, if any.
    #[inline]
    pub(super) fn end(&mut self) {
        if !self.any {
            return;
        }
        let mut c = if self.long {
            Cue::Other
        } else {
            cue(u128::from_le_bytes(self.w), self.all_caps && self.len > 1)
        };
        // A misspelt harm word where one would be the asking phrase's object ("build a
        // write maleware"). Read only within reach of an asking phrase: a few words of a
        // few requests, never the prose around them.
        if c == Cue::Other
            && !self.long
            && self.len >= MISSPELT_MIN
            && self.m.req.reaches(self.m.n + 1)
        {
            c = misspelt_harm(self.w.get(..self.len).unwrap_or_default());
        }
        // "Make the search ignore case, then follow the instructions below": the ignore
        // verb has its object, which is no rule. Read only after an ignore verb.
        if c == Cue::Other
            && !self.long
            && self.m.back(0) == Cue::Drop
            && is_mundane_object(self.w.get(..self.len).unwrap_or_default())
        {
            self.m.drop_has_object();
        }
        self.m.word(c);
        self.w = [0; lexicon::MAX_WORD];
        self.len = 0;
        self.long = false;
        self.all_caps = true;
        self.any = false;
    }

    pub(super) fn finish(mut self) -> RiskFlags {
        self.end();
        self.m.clause_end();
        self.m.flags
    }
}
