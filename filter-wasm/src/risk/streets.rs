//! Street words in many languages: street types before or after a name, compound street
//! names ("-straße", "-katu", "-vej"), and the Greek and Cyrillic forms.

use super::*;

/// Greek and Cyrillic street types, lowercase, full or abbreviated (`lists/foreign_street_words.txt`).
pub(super) const FOREIGN_STREET_WORDS: &str = include_str!("lists/foreign_street_words.txt");

/// Street types written before the street's name, capitalised, in Spanish, Portuguese,
/// Italian, Romanian, Catalan, French and Polish addresses ("Avenida de Florinda Nicolau
/// 56", "Soseaua Ionescu Nr. 92", "Via Rossi 12"); abbreviations of one or two letters but
/// "Av" count only before a dot ("Av. Chaco 76", "R. Faria, 7", "C. de Alcalá 21").
pub(super) fn is_street_first(w: &[u8]) -> bool {
    matches!(
        w,
        // Spanish.
        b"calle"
            | b"avenida"
            | b"avda"
            | b"av"
            | b"c"
            | b"paseo"
            | b"pasaje"
            | b"psje"
            | b"camino"
            | b"carretera"
            | b"ronda"
            | b"plaza"
            | b"alameda"
            | b"rambla"
            | b"vial"
            | b"travesia"
            | b"glorieta"
            | b"cuesta"
            | b"callejon"
            | b"urbanizacion"
            | b"bulevar"
            | b"privada"
            | b"cerrada"
            | b"andador"
            | b"circuito"
            | b"prolongacion"
            | b"pasadizo"
            | b"acceso"
            | b"viaducto"
            | b"corredor"
            | b"calzada"
            | b"carrera"
            | b"cra"
            | b"cr"
            | b"kr"
            | b"diagonal"
            | b"transversal"
            // Portuguese.
            | b"rua"
            | b"r"
            | b"travessa"
            | b"ladeira"
            | b"largo"
            | b"praca"
            | b"estrada"
            | b"rodovia"
            | b"quadra"
            | b"esplanada"
            | b"viaduto"
            | b"beco"
            | b"vila"
            | b"viela"
            | b"setor"
            | b"colonia"
            | b"trevo"
            | b"favela"
            | b"conjunto"
            | b"fazenda"
            | b"chacara"
            | b"sitio"
            | b"morro"
            // Italian.
            | b"via"
            | b"viale"
            | b"corso"
            | b"piazza"
            | b"piazzale"
            | b"vicolo"
            | b"contrada"
            | b"rotonda"
            | b"canale"
            | b"strada"
            | b"borgo"
            | b"lungomare"
            | b"salita"
            | b"vico"
            | b"stretto"
            | b"incrocio"
            | b"traversa"
            // Romanian.
            | b"soseaua"
            | b"sos"
            | b"bulevardul"
            | b"bd"
            | b"calea"
            | b"aleea"
            | b"splaiul"
            | b"intrarea"
            | b"piata"
            | b"drumul"
            | b"str"
            // Catalan, French, Polish.
            | b"carrer"
            | b"rue"
            | b"avenue"
            | b"boulevard"
            | b"chemin"
            | b"allee"
            | b"impasse"
            | b"quai"
            | b"ulica"
            | b"aleja"
            | b"al"
            | b"plac"
            | b"pl"
    )
}

/// French street types written in lowercase between the house number and the name (`lists/french_street_types.txt`).
pub(super) const FRENCH_STREET_TYPES: &str = include_str!("lists/french_street_types.txt");

/// Courtesy titles that precede a name (`lists/honorifics.txt`).
pub(super) const HONORIFICS: &str = include_str!("lists/honorifics.txt");

/// Street words matched whole (`lists/street_words.txt`).
pub(super) const STREET_WORDS: &str = include_str!("lists/street_words.txt");

/// Street suffixes that count only in "house number, capitalised name, suffix" (see
/// [`ContextScanner::word`]); as words of their own they are too common. The street types of
/// postal address conventions (USPS Publication 28, Royal Mail).
pub(super) fn is_street_suffix(w: &[u8]) -> bool {
    matches!(
        w,
        b"crescent"
            | b"close"
            | b"mews"
            | b"grove"
            | b"gardens"
            | b"bypass"
            | b"causeway"
            | b"crossing"
            | b"dam"
            | b"lodge"
            | b"squares"
            | b"heights"
            | b"ridge"
            | b"loop"
            | b"pike"
            | b"turnpike"
            | b"row"
            | b"walk"
            | b"alley"
            | b"expressway"
            | b"freeway"
            | b"junction"
            | b"landing"
            | b"manor"
            | b"meadow"
            | b"meadows"
            | b"orchard"
            | b"passage"
            | b"path"
            | b"quay"
            | b"wharf"
            | b"esplanade"
            | b"promenade"
            | b"underpass"
            | b"overpass"
            | b"viaduct"
            | b"vista"
            | b"glen"
            | b"knoll"
            | b"hollow"
            | b"cove"
            | b"creek"
            | b"estates"
            // Place-like ones, common in generated and real addresses ("119 Nino Point",
            // "71 Berg Hills").
            | b"point"
            | b"points"
            | b"port"
            | b"hill"
            | b"hills"
            | b"flats"
            | b"falls"
            | b"springs"
            | b"pines"
            | b"plains"
            | b"shore"
            | b"shores"
            | b"valley"
            | b"village"
            | b"ville"
            | b"mill"
            | b"mills"
            | b"harbor"
            | b"harbour"
            | b"haven"
            | b"brook"
            | b"brooks"
            | b"canyon"
            | b"cliffs"
            | b"crest"
            | b"dale"
            | b"ferry"
            | b"ford"
            | b"forge"
            | b"forks"
            | b"fort"
            | b"inlet"
            | b"islands"
            | b"knolls"
            | b"lake"
            | b"lakes"
            | b"mountain"
            | b"prairie"
            | b"ranch"
            | b"rapids"
            | b"shoals"
            | b"summit"
            // The rest of the USPS street types (Publication 28, appendix C1) and their
            // plurals, as generated addresses use them ("90842 Vincent Ports", "83898 John
            // Tunnel", "46820 Johnny Circles"): measured on generated addresses, these
            // forms were missed.
            | b"annex"
            | b"arcade"
            | b"bayou"
            | b"beach"
            | b"bend"
            | b"bluff"
            | b"bluffs"
            | b"bottom"
            | b"branch"
            | b"bridge"
            | b"burg"
            | b"burgs"
            | b"camp"
            | b"cape"
            | b"center"
            | b"centers"
            | b"circles"
            | b"cliff"
            | b"club"
            | b"common"
            | b"commons"
            | b"corner"
            | b"corners"
            | b"course"
            | b"courts"
            | b"coves"
            | b"crossroad"
            | b"crossroads"
            | b"curve"
            | b"divide"
            | b"drives"
            | b"estate"
            | b"extension"
            | b"extensions"
            | b"fields"
            | b"fork"
            | b"forest"
            | b"forges"
            | b"fords"
            | b"garden"
            | b"gateway"
            | b"glens"
            | b"green"
            | b"greens"
            | b"groves"
            | b"harbors"
            | b"isle"
            | b"island"
            | b"junctions"
            | b"key"
            | b"keys"
            | b"lights"
            | b"loaf"
            | b"lock"
            | b"locks"
            | b"mall"
            | b"manors"
            | b"mission"
            | b"motorway"
            | b"mountains"
            | b"neck"
            | b"oval"
            | b"parks"
            | b"parkways"
            | b"pine"
            | b"plain"
            | b"ports"
            | b"radial"
            | b"ramp"
            | b"rest"
            | b"ridges"
            | b"river"
            | b"roads"
            | b"route"
            | b"shoal"
            | b"skyway"
            | b"spur"
            | b"spurs"
            | b"station"
            | b"stravenue"
            | b"stream"
            | b"streets"
            | b"throughway"
            | b"trace"
            | b"track"
            | b"trafficway"
            | b"tunnel"
            | b"union"
            | b"unions"
            | b"valleys"
            | b"view"
            | b"views"
            | b"villages"
            | b"walks"
            | b"ways"
            | b"wells"
            // Australian and New Zealand ones ("339 Martin Parklands", "841 Stuart
            // Concourse").
            | b"parklands"
            | b"concourse"
            | b"retreat"
            | b"cutting"
            | b"grange"
    )
}

/// Compound street names ("Koskikatu", "Mellemvej", "Hauptstraße", "Hammarvägen"): a word
/// of at least two letters before one of the street types that German, Dutch, Scandinavian
/// and Finnish addresses join to the street's name ("Lizedreef", "Mikasteeg", "Asptorget",
/// "Paulsenvollen", "Louhikkopolku", "Gstreinplatz", "Schusterstr."). Measured on generated
/// addresses, single-word streets of these forms were missed. English words ending in
/// "-ring" ("during", "string", "bearing") are not streets.
pub(super) fn street_compound(w: &[u8]) -> bool {
    const SUFFIXES: [&[u8]; 66] = [
        b"strasse",
        b"strase",
        b"gasse",
        b"weg",
        b"vej",
        b"vei",
        b"veien",
        b"gata",
        b"gatan",
        b"gade",
        b"katu",
        b"kuja",
        b"tie",
        b"straat",
        b"laan",
        b"vegur",
        b"vagen",
        b"vegen",
        // German.
        b"platz",
        b"allee",
        b"ring",
        b"damm",
        b"ufer",
        b"steig",
        b"pfad",
        b"str",
        b"chaussee",
        b"stieg",
        // Dutch.
        b"dreef",
        b"baan",
        b"steeg",
        b"plein",
        b"singel",
        b"gracht",
        b"kade",
        b"dijk",
        b"hof",
        b"pad",
        // Norwegian, Swedish, Danish.
        b"stien",
        b"svingen",
        b"bakken",
        b"backen",
        b"haugen",
        b"jordet",
        b"tunet",
        b"vollen",
        b"stykket",
        b"holtet",
        b"skogen",
        b"sletta",
        b"kroken",
        b"plassen",
        b"lunden",
        b"grenda",
        b"stigen",
        b"torget",
        b"gangen",
        b"leden",
        b"plads",
        // Finnish.
        b"polku",
        b"kaari",
        b"bulevardi",
        b"rinne",
        b"raitti",
        b"vayla",
        b"aukio",
    ];
    // Most words are rejected on their last three letters alone, looked up once: the
    // suffixes that end in them, as bits of `SUFFIXES`.
    const TAILS: [&[u8]; 53] = [
        b"sse", b"ase", b"weg", b"vej", b"vei", b"ien", b"ata", b"tan", b"ade", b"atu", b"uja",
        b"tie", b"aat", b"aan", b"gur", b"gen", b"atz", b"lee", b"ing", b"amm", b"fer", b"eig",
        b"fad", b"str", b"see", b"ieg", b"eef", b"eeg", b"ein", b"gel", b"cht", b"ijk", b"hof",
        b"pad", b"ken", b"det", b"net", b"len", b"ket", b"tet", b"tta", b"sen", b"den", b"nda",
        b"get", b"ads", b"lku", b"ari", b"rdi", b"nne", b"tti", b"yla", b"kio",
    ];
    // One bit per suffix.
    const _: () = assert!(SUFFIXES.len() <= 128);
    static BY_TAIL: OnceLock<WordTable<u128>> = OnceLock::new();
    let tail = match w {
        [.., a, b, c] if w.len() >= 5 => [*a, *b, *c],
        _ => return false,
    };
    let by_tail = BY_TAIL.get_or_init(|| {
        WordTable::new(
            TAILS.iter().map(|&t| {
                let bits = SUFFIXES
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.ends_with(t))
                    .fold(0u128, |acc, (k, _)| acc | 1 << k);
                (t, bits)
            }),
            |a, b| a | b,
        )
    });
    let mut candidates = by_tail.get(&tail);
    if candidates == 0 {
        return false;
    }
    if tail == *b"ing"
        && (w.ends_with(b"string")
            || w.ends_with(b"spring")
            || matches!(
                w.get(w.len().saturating_sub(5)),
                Some(b'a' | b'e' | b'i' | b'o' | b'u' | b'y' | b'r')
            ))
    {
        return false;
    }
    while candidates != 0 {
        let k = candidates.trailing_zeros() as usize;
        candidates &= candidates - 1;
        if SUFFIXES
            .get(k)
            .is_some_and(|s| w.len() >= s.len() + 2 && w.ends_with(s))
        {
            return true;
        }
    }
    false
}
