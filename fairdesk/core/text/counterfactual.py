"""Counterfactual texts by identity-term substitution (METHODS §5; 002 "counterfactual token fairness").

A *term set* (:class:`TermSet`) is either

* **pairwise** — a list of terms (Dixon et al.'s 50, the race list, a user's file with one term per line, multi-word
  terms allowed). ``Φ_{a,a'}(x)`` replaces every occurrence of ``a`` by ``a'`` and every ``a'`` by ``a``; a text
  gets one counterfactual per unordered pair ``{a, a'}`` of which it mentions at least one; or
* **paired** — two aligned groups, one ``left form | right form`` per line (the clinical gender list): every form of
  either group is swapped with its partner at once, so a text gets one counterfactual.

Rules (each is tested in ``tests/core/test_counterfactual_text.py``):

* **Substitute, never delete.** (TensorFlow Model Remediation's default counterfactual deletes the terms.)
* **Whole words and multi-word terms**, case-insensitive: a term matches only between non-word, non-hyphen
  characters, and the words of a multi-word term may be separated by spaces or a hyphen. Each term is its own
  anchored alternative (TFMR's filter pattern anchors only the first and last term, so "transparent" passes the
  filter for "trans"). A pairwise single-word term also matches its plural in "s", and the plural is kept.
* **Capitalisation kept**: lower → lower, Title → Title (each word of a multi-word replacement when every word of the
  match was capitalised, else the first letter only), UPPER → UPPER.
* **Other senses untouched** (:data:`OTHER_SENSES`): a match is skipped when the words around it show another
  sense — "white blood cells", "white count", "black stool", "Asian flu", "straight leg raise", "45 year old",
  "double-blind", "trans fat", "American Heart Association", "14F Foley". Longer words never match ("theory",
  "gayety", "WBC").
* **Pronouns by role** (paired sets): "her" → "him" when it is an object, "his" when it is a determiner; "his" →
  "her" (determiner) or "hers" (pronoun). The role guess (:func:`pronoun_role`) looks at the next word: end of text,
  punctuation or a closed-class word (preposition, conjunction, article, pronoun, auxiliary, adverb such as
  "today", "home", "again", a number) → object / pronoun; any other word → determiner. After a verb that takes two
  objects ("gave", "told", "asked", "offered", …) "her" is an object unless the next word is a relative or a body
  part ("told her husband", "examined her abdomen"). It fails on sentences a tagger would also find hard: "gave
  her medication" (read as the indirect object, "gave him medication", though "his medication" may be meant),
  "his and her towels" (→ "hers and his towels"), "her" before an adverb of manner not in the list.
* **Age/sex shorthand** (paired sets): "45 yo M" ↔ "45 yo F", "45M" ↔ "45F", "Sex: M" ↔ "Sex: F"; Mr ↔ Ms/Mrs
  (Mr → Ms) only before a name ("Mr. Jones"). Capitalised HE, HIS, HER, HIM, MR, MS, MRS inside mixed-case text
  are clinical abbreviations (hepatic encephalopathy, mitral regurgitation, multiple sclerosis, …), left alone; in
  an all-capitals note they are pronouns and titles. A number + F/M followed by a device word ("14F Foley", "7F sheath") is a French size, left alone.
* **Sex-specific meaning** (paired sets flagged ``sex_specific``): a text mentioning pregnancy, prostate, ovaries,
  menstruation, … (:data:`SEX_SPECIFIC`) has no valid gender counterfactual; it is left out and counted, never
  rewritten. The whole text is left out (not one sentence of it), so a note never mixes swapped and unswapped
  sentences.

Nothing here imports torch.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from fairdesk.core.errors import DataError
from fairdesk.core.progress import CancelToken, ProgressFn, Reporter

BUILTIN_SETS = ("dixon", "dixon_train", "dixon_held_out", "gender", "race", "control")
#: the built-in sets as a report names them (their file names are not for readers)
BUILTIN_TITLES = {"dixon": "the Dixon et al. identity terms", "dixon_train": "the Dixon et al. training terms",
                  "dixon_held_out": "the Dixon et al. held-out terms", "gender": "the gender terms",
                  "race": "the race terms", "control": "the neutral control words"}
IDENTITY_TOKEN = "<identity>"

# --- other senses: (term, regex on the text BEFORE the match (anchored at its end), regex on the text AFTER) -----
_W = r"[\s-]+"
OTHER_SENSES: dict[str, tuple[str | None, str | None]] = {
    "white": (r"\begg\s+$", r"^,?\s+(blood|cell|cells|count|counts|matter|coat|patch|patches|plaque|plaques|spot|"
                            r"spots|sputum|discharge|lesion|lesions|exudate|exudates|reflex|light|board|noise|"
                            r"out)\b"),
    "whites": (r"\begg\s+$", None),
    "black": (None, r"^,?\s+(stool|stools|tarry|emesis|vomit|box|eye|eyes|cohosh|mold|mould|lesion|lesions|spot|"
                    r"spots|out|outs|urine|sputum|tongue|eschar|toenail|toenails)\b"),
    "asian": (None, r"^\s+flu\b"),
    "straight": (r"\b(sit|sits|sat|sitting|stand|stands|stood|standing|walk|walks|walked|walking|look|looks|"
                 r"looking|lie|lying|keep|kept|hold|held|go|went|came|come|drove|ran)\s+$",
                 r"^\s+(leg|legs|cath|catheter|catheterization|line|to|away|ahead|back|for|through|into|up|down|"
                 r"out|home|after|from|on)\b"),
    "old": (r"(\d|\b(year|years|yr|yrs|month|months|mo|day|days|week|weeks|hour|hours))[\s-]*$",
            r"^\s+(infarct|infarcts|infarction|mi|fracture|fractures|scar|scars|records|record|notes|note|chart|"
            r"blood|injury|injuries|stroke|strokes|lacunar|ischemic|films|imaging|study|studies)\b"),
    "blind": (r"\b(double|single|triple)[\s-]*$",
              r"^\s+(loop|spot|pouch|study|trial|biopsy|biopsies|insertion|intubation|end)\b"),
    "indian": (None, r"^\s+(ink|file)\b"),
    "american": (None, r"^\s+(heart|diabetes|cancer|college|academy|society|association|red|thoracic|urological|"
                       r"psychiatric|medical|journal)\b"),
    "trans": (None, r"^\s+(fat|fats|fatty|esophageal|thoracic|abdominal|tibial|catheter|septal|urethral)\b"),
    "male": (None, r"^\s+(connector|connectors|adapter|adaptor|luer|end|pattern)\b"),
    "female": (None, r"^\s+(connector|connectors|adapter|adaptor|luer|end)\b"),
    "young": (None, r"^\s+(modulus)\b"),
}
_OTHER_RE = {k: (re.compile(b, re.I) if b else None, re.compile(a, re.I) if a else None)
             for k, (b, a) in OTHER_SENSES.items()}

# --- meanings that depend on sex: a gender counterfactual of such a text is not valid --------------------------
SEX_SPECIFIC = (
    # word stems, matched inside longer words too ("postmenopausal", "intrauterine", "nonpregnant")
    r"pregnan|prostat|ovar(y|ies|ian)|oophor|uter(us|ine)|cervix|testic|testes|scrot|menstru|menopaus|menarche|"
    r"menses|hysterectom|vasectom|orchi(ect|tis|dop)|endometri|vagin|vulv|penile|penis|erectile|gravida|postpartum|"
    r"post-partum|cesarean|c-section|placent|fetal|fetus|gestation|trimester|obstetric|lactat|breastfe|breast-fe|"
    r"mammogra|pap smear|gynecolog|ob/gyn|ectopic|miscarriage|abortion|eclampsia|in vitro fertili|seminal|sperm|"
    r"circumcis",
    # short words and abbreviations, matched as whole words only
    r"g\d+p\d+|lmp|psa|bph|turp|ivf|edd")
_SEX_SPECIFIC_RE = re.compile(rf"(?:{SEX_SPECIFIC[0]})|(?<![\w])(?:{SEX_SPECIFIC[1]})(?![\w])", re.I)

# --- pronoun roles ---------------------------------------------------------------------------------------------
_CLOSED = set("""
to with for from at in on by about into onto over under after before during through without since until as like
than via per upon toward towards against among around near off of
and or but so because if when while that who whom which where then nor yet
a an the this these those some any no every each his her their its my your our all both
he she it they we i you him them us me
is was were are be been being has have had will would should can could may might must did does do
today yesterday tomorrow tonight now again home up down out back away well too also here there soon later first
immediately daily twice once prn already still very not just only more less
""".split())
_DITRANSITIVE = set("""gave give gives giving told tell tells telling showed show shows showing offered offer offers
sent send sends asked ask asks taught teach handed hand hands prescribed prescribe prescribes brought bring bought
reminded remind reminds advised advise advises informed inform informs instructed instruct instructs
""".split())
_POSSESSED = set("""husband wife son daughter sons daughters mother father brother sister family children child kids
partner boyfriend girlfriend friend friends pcp doctor physician nurse caregiver parents abdomen chest back head
neck arm arms leg legs hand hands foot feet eye eyes ear ears knee knees hip hips shoulder shoulders skin wound
wounds medication medications meds history symptoms pain name age weight""".split())
_NUMBER_RE = re.compile(r"^\d")

# --- age/sex shorthand ------------------------------------------------------------------------------------------
_DEVICE = (r"^\s*(fr|french|catheter|catheters|foley|sheath|sheaths|tube|tubes|drain|drains|introducer|cannula|"
           r"needle|needles|ngt|ett|pigtail|stent|stents|dilator|dilators|gauge|g)\b")
_DEVICE_RE = re.compile(_DEVICE, re.I)
_SHORTHAND_RES = (
    re.compile(r"(?<![\w/])\d{1,3}\s*(?:yo|y/o|y\.o\.|yr\.? old|yrs? old|years? old|year-old|-year-old|yoa)\s*"
               r"(?P<sex>[MFmf])(?![\w/])"),
    re.compile(r"(?<![\w/.])(?P<age>\d{1,3})(?P<sex>[MF])(?![\w/])"),
    re.compile(r"\b(?:sex|gender)\s*[:=]\s*(?P<sex>[MFmf])(?![\w/])", re.I),
)


@dataclass(frozen=True)
class TermSet:
    """A checked term set. ``groups[i]`` names group i; ``forms[i]`` are its surface forms (lower case).

    Pairwise sets: one group per term, ``forms[i] == (term,)``. Paired sets: two groups whose forms are aligned by
    line (``forms[0][k]`` ↔ ``forms[1][k]``); a form may appear on several lines (his ↔ her, his ↔ hers).
    """

    name: str
    groups: tuple[str, ...]
    forms: tuple[tuple[str, ...], ...]
    paired: bool = False
    sex_specific: bool = False
    source: str = ""
    sha256: str = ""
    _cache: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    @property
    def terms(self) -> tuple[str, ...]:
        return self.groups

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": "paired" if self.paired else "pairwise", "groups": list(self.groups),
                "forms": [list(f) for f in self.forms], "sex_specific": self.sex_specific, "source": self.source,
                "sha256": self.sha256}

    @classmethod
    def from_dict(cls, d: dict) -> "TermSet":
        return cls(str(d["name"]), tuple(d["groups"]), tuple(tuple(f) for f in d["forms"]),
                   d.get("kind") == "paired", bool(d.get("sex_specific", False)), str(d.get("source", "")),
                   str(d.get("sha256", "")))

    # ---------------------------------------------------------------- compiled matcher (cached per instance)
    def _matcher(self):
        if "re" in self._cache:
            return self._cache["re"], self._cache["lookup"]
        lookup: dict[str, int] = {}
        for g, forms in enumerate(self.forms):
            for f in forms:
                lookup.setdefault(_norm(f), g)
        alts = sorted(lookup, key=lambda s: (-len(s), s))
        body = "|".join(_W.join(re.escape(w) for w in a.split(" ")) for a in alts)
        plural = "" if self.paired else r"(?P<pl>s)?"
        rx = re.compile(rf"(?<![\w-])(?P<t>{body}){plural}(?![\w-])", re.I)
        self._cache.update(re=rx, lookup=lookup)
        return rx, lookup

    def partners(self, form: str) -> list[str]:
        """Paired sets: the partner forms of ``form`` in file order (several for her, his, Mr)."""
        key = ("partners", form)
        if key not in self._cache:
            out = []
            for g in (0, 1):
                for k, f in enumerate(self.forms[g]):
                    if _norm(f) == form:
                        p = self.forms[1 - g][k]
                        if p not in out:
                            out.append(p)
            self._cache[key] = out
        return self._cache[key]


@dataclass(frozen=True)
class Match:
    start: int
    end: int
    text: str       # as written
    group: int      # index into TermSet.groups
    form: str       # the matched form (normalised) — "" for shorthand letters
    plural: str = ""


@dataclass(frozen=True)
class Counterfactual:
    text: str
    term: str
    counterfactual_term: str
    spans: tuple[tuple[int, int, str, str], ...]      # (start, end, original, replacement) in the ORIGINAL text
    new_spans: tuple[tuple[int, int], ...] = ()       # where the replacements sit in the counterfactual text


def _norm(s: str) -> str:
    return " ".join(s.lower().replace("-", " ").split())


# ==============================================================================================================
# Loading term sets


def terms_dir() -> Path:
    from fairdesk.paths import resources_dir

    return resources_dir() / "text" / "identity_terms"


def parse_terms(text: str, name: str, source: str = "", sha256: str = "", sex_specific: bool | None = None) -> TermSet:
    """A term set from file text: one term per line (pairwise) or ``left | right`` per line (paired).

    ``#`` starts a comment; ``# groups: a | b`` names the two groups of a paired file.
    """
    lines, group_names = [], None
    for raw in text.splitlines():
        s = raw.strip()
        if s.startswith("#"):
            m = re.match(r"#\s*groups\s*:\s*(.+?)\s*\|\s*(.+?)\s*$", s, re.I)
            if m:
                group_names = (m.group(1), m.group(2))
            continue
        if s:
            lines.append(" ".join(s.split()))
    if not lines:
        raise DataError(f"The term list '{name}' has no terms; write one term per line (or 'a | b' per line for two "
                        "aligned groups).")
    paired = [("|" in s) for s in lines]
    if any(paired) and not all(paired):
        raise DataError(f"The term list '{name}' mixes 'a | b' lines with single terms; use one form throughout.")
    bad = [s for s in lines if not re.search(r"\w", s.replace("|", ""))]
    if bad:
        raise DataError(f"The term list '{name}' has a line with no word in it: '{bad[0]}'.")
    if all(paired):
        left, right = [], []
        for s in lines:
            parts = [p.strip() for p in s.split("|")]
            if len(parts) != 2 or not all(parts):
                raise DataError(f"The term list '{name}': line '{s}' must be 'left form | right form'.")
            left.append(parts[0])
            right.append(parts[1])
        overlap = {_norm(x) for x in left} & {_norm(x) for x in right}
        if overlap:
            raise DataError(f"The term list '{name}': '{sorted(overlap)[0]}' appears in both groups.")
        groups = group_names or ("group_1", "group_2")
        return TermSet(name, tuple(groups), (tuple(left), tuple(right)), True,
                       bool(sex_specific) if sex_specific is not None else False, source, sha256)
    terms, seen = [], set()
    for s in lines:
        t = " ".join(s.lower().split())
        if _norm(t) not in seen:
            seen.add(_norm(t))
            terms.append(t)
    if len(terms) < 2:
        raise DataError(f"The term list '{name}' needs at least two terms to swap.")
    return TermSet(name, tuple(terms), tuple((t,) for t in terms), False, bool(sex_specific), source, sha256)


def load_terms(spec: "str | Path | TermSet") -> TermSet:
    """``dixon`` | ``dixon_train`` | ``dixon_held_out`` | ``gender`` | ``race`` | ``control`` | a text file."""
    if isinstance(spec, TermSet):
        return spec
    files = {"dixon": "dixon50.txt", "dixon_train": "dixon_train.txt", "dixon_held_out": "dixon_held_out.txt",
             "gender": "gender.txt", "race": "race.txt", "control": "control.txt"}
    key = str(spec).strip().lower().replace("-", "_")
    if key in files:
        path, name = terms_dir() / files[key], key
    else:
        path, name = Path(spec), Path(spec).name
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise DataError(f"Cannot read the term list {path}: {err.strerror or err}. Give one of "
                        f"{', '.join(BUILTIN_SETS)} or a text file with one term per line.") from err
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"The term list {path.name} is not UTF-8 text; save it as UTF-8.") from err
    return parse_terms(text, name, source=str(path), sha256=hashlib.sha256(raw).hexdigest(),
                       sex_specific=(key == "gender"))


# ==============================================================================================================
# Matching


def _other_sense(text: str, start: int, end: int, form: str) -> bool:
    rules = _OTHER_RE.get(form)
    if not rules:
        return False
    before, after = rules
    return bool((before and before.search(text[max(0, start - 40):start]))
                or (after and after.search(text[end:end + 40])))


#: Short forms that are clinical abbreviations when written in capitals inside mixed-case text: HE (hepatic
#: encephalopathy), MR (mitral regurgitation), MS (multiple sclerosis, mitral stenosis, morphine sulfate), HIM.
_ABBREVIATIONS = {"he", "him", "his", "her", "mr", "ms", "mrs"}
_TITLE_NEXT = re.compile(r"^\.?\s+[A-Z]")


def _abbreviation(text: str, start: int, end: int, form: str) -> bool:
    word = text[start:end]
    if form in _ABBREVIATIONS and word.isupper() and len(word) > 1:
        around = text[max(0, start - 30):end + 30]
        if any(c.islower() for c in around):
            return True
    if form in ("mr", "ms", "mrs") and not _TITLE_NEXT.match(text[end:end + 4]):
        return True  # a title is followed by a name: "Mr. Jones", "Ms Park"
    return False


def find_terms(text: str, terms: TermSet) -> list[Match]:
    """Every identity-term occurrence in ``text`` (left to right, non-overlapping, other senses skipped)."""
    rx, lookup = terms._matcher()
    out: list[Match] = []
    for m in rx.finditer(text):
        form = _norm(m.group("t"))
        pl = (m.groupdict().get("pl") or "")
        if _other_sense(text, m.start(), m.end(), form) or (pl and _other_sense(text, m.start(), m.end(), form + pl)):
            continue
        if terms.paired and _abbreviation(text, m.start(), m.end(), form):
            continue
        out.append(Match(m.start(), m.end(), m.group(0), lookup[form], form, pl))
    if terms.paired:
        taken = [(x.start, x.end) for x in out]
        for srx in _SHORTHAND_RES:
            for m in srx.finditer(text):
                s, e = m.span("sex")
                if _DEVICE_RE.search(text[e:e + 30]):
                    continue
                if m.groupdict().get("age") is not None and int(m.group("age")) > 120:
                    continue
                if any(a < e and s < b for a, b in taken):
                    continue
                taken.append((s, e))
                letter = m.group("sex").upper()
                group = _shorthand_group(terms, letter)
                if group is not None:
                    out.append(Match(s, e, m.group("sex"), group, ""))
        out.sort(key=lambda x: x.start)
    return out


def _shorthand_group(terms: TermSet, letter: str) -> int | None:
    """Which group the letter M / F belongs to: the group holding 'male' (resp. 'female')."""
    word = "male" if letter == "M" else "female"
    for g, forms in enumerate(terms.forms):
        if word in {_norm(f) for f in forms}:
            return g
    return None


def mentions(text: str, terms: TermSet) -> bool:
    return bool(find_terms(text, terms))


def exclusion_reason(text: str, terms: TermSet) -> str | None:
    """Why ``text`` has no valid counterfactual under ``terms`` (None when it has one or mentions no term)."""
    if terms.sex_specific:
        m = _SEX_SPECIFIC_RE.search(text)
        if m and find_terms(text, terms):
            return f"no valid counterfactual: meaning depends on sex ('{m.group(0)}')"
    return None


# ==============================================================================================================
# Case and pronoun roles


def match_case(src: str, dst: str) -> str:
    letters = [c for c in src if c.isalpha()]
    if not letters:
        return dst
    if all(c.isupper() for c in letters) and (len(letters) > 1 or len(src.strip()) == 1):
        return dst.upper()
    if letters[0].isupper():
        words = [w for w in re.split(r"[\s-]+", src) if w]
        if len(words) > 1 and all(w[0].isupper() for w in words if w[0].isalpha()):
            return re.sub(r"(^|[\s-])(\w)", lambda m: m.group(1) + m.group(2).upper(), dst.lower())
        return dst[:1].upper() + dst[1:] if not dst[:1].isupper() else dst
    return dst.lower()


_WORD_AFTER = re.compile(r"^\s*([A-Za-z0-9][\w'/-]*)")
_WORD_BEFORE = re.compile(r"([A-Za-z][\w'-]*)\s*$")


def pronoun_role(text: str, start: int, end: int) -> str:
    """``"object"`` or ``"determiner"`` for a "her"/"his" at ``text[start:end]`` (see the module docstring)."""
    nxt = _WORD_AFTER.match(text[end:end + 40])
    if not nxt:  # end of text or punctuation next: "saw her." / "told her, and"
        return "object"
    word = nxt.group(1).lower()
    prev = _WORD_BEFORE.search(text[max(0, start - 30):start])
    if prev and prev.group(1).lower() in _DITRANSITIVE and word not in _POSSESSED:
        return "object"
    if word in _CLOSED or _NUMBER_RE.match(word):
        return "object"
    return "determiner"


def _replacement(text: str, m: Match, terms: TermSet, target_group: int) -> str:
    """The surface form that replaces match ``m`` when its group is swapped for ``target_group``."""
    if not m.form:  # shorthand letter M / F
        return match_case(m.text, "F" if m.text.upper() == "M" else "M")
    if not terms.paired:
        new = terms.forms[target_group][0]
        return match_case(m.text, new) + (m.plural or "")
    options = terms.partners(m.form)
    if len(options) > 1:
        role = pronoun_role(text, m.start, m.end)
        lo = {_norm(o): o for o in options}
        if m.form == "her":
            pick = lo.get("him") if role == "object" else lo.get("his")
        elif m.form == "his":
            pick = lo.get("hers") if role == "object" else lo.get("her")
        else:
            pick = None
        new = pick or options[0]
    else:
        new = options[0]
    return match_case(m.text, new)


def _apply(text: str, matches: list[Match], terms: TermSet, swap: dict[int, int]) -> tuple[str, tuple, tuple]:
    out, spans, new_spans, pos = [], [], [], 0
    length = 0
    for m in matches:
        if m.group not in swap:
            continue
        new = _replacement(text, m, terms, swap[m.group])
        chunk = text[pos:m.start]
        out.append(chunk)
        length += len(chunk)
        out.append(new)
        spans.append((m.start, m.end, m.text, new))
        new_spans.append((length, length + len(new)))
        length += len(new)
        pos = m.end
    out.append(text[pos:])
    return "".join(out), tuple(spans), tuple(new_spans)


# ==============================================================================================================
# Counterfactuals


def counterfactuals(text: str, terms: TermSet) -> list[Counterfactual]:
    """``Φ(x)``: every counterfactual of ``text`` (empty when it mentions no term or has no valid one).

    Pairwise sets: one per unordered pair ``{a, a'}`` with ``a`` mentioned (``term`` = the first-mentioned of the
    two). Paired sets: one, swapping both groups (``term`` = the group mentioned first).
    """
    matches = find_terms(text, terms)
    if not matches or exclusion_reason(text, terms):
        return []
    out = []
    if terms.paired:
        new, spans, new_spans = _apply(text, matches, terms, {0: 1, 1: 0})
        g = matches[0].group
        return [Counterfactual(new, terms.groups[g], terms.groups[1 - g], spans, new_spans)]
    order: list[int] = []
    for m in matches:
        if m.group not in order:
            order.append(m.group)
    done: set[frozenset] = set()
    for a in order:
        for b in range(len(terms.groups)):
            key = frozenset((a, b))
            if b == a or key in done:
                continue
            done.add(key)
            new, spans, new_spans = _apply(text, matches, terms, {a: b, b: a})
            out.append(Counterfactual(new, terms.groups[a], terms.groups[b], spans, new_spans))
    return out


def counterfactual_texts(text: str, terms: TermSet) -> list[tuple[str, str, str]]:
    """``Φ(x)`` as (term, counterfactual_term, text) triples, in the order of :func:`counterfactuals` and with the
    same texts, without spans: the fast path for audits (pairwise sets are assembled from pre-cased pieces)."""
    matches = find_terms(text, terms)
    if not matches or exclusion_reason(text, terms):
        return []
    if terms.paired:
        return [(c.term, c.counterfactual_term, c.text) for c in counterfactuals(text, terms)]
    pieces, pos = [], 0
    for m in matches:
        pieces.append(text[pos:m.start])
        pos = m.end
    tail = text[pos:]
    cache = terms._cache.setdefault("cased", {})

    def cased(m: Match, g: int) -> str:
        key = (m.text, m.plural, g)
        v = cache.get(key)
        if v is None:
            v = cache[key] = match_case(m.text, terms.forms[g][0]) + (m.plural or "")
        return v

    order: list[int] = []
    for m in matches:
        if m.group not in order:
            order.append(m.group)
    names = terms.groups
    out, done = [], set()
    for a in order:
        for b in range(len(names)):
            if b == a or (b, a) in done:
                continue
            done.add((a, b))
            parts = []
            for piece, m in zip(pieces, matches):
                parts.append(piece)
                parts.append(cased(m, b) if m.group == a else cased(m, a) if m.group == b else m.text)
            parts.append(tail)
            out.append((names[a], names[b], "".join(parts)))
    return out


def random_counterfactual(text: str, terms: TermSet, rng) -> str | None:
    """The training-time counterfactual of 002 (CLP): each identity-term occurrence is replaced by a random other
    term (pairwise sets) or swapped with its partner (paired sets). None when ``text`` has no valid one."""
    matches = find_terms(text, terms)
    if not matches or exclusion_reason(text, terms):
        return None
    if terms.paired:
        return _apply(text, matches, terms, {0: 1, 1: 0})[0]
    n = len(terms.groups)
    out, pos = [], 0
    for m in matches:
        b = int(rng.integers(n - 1))
        b = b + 1 if b >= m.group else b
        out.append(text[pos:m.start])
        out.append(_replacement(text, m, terms, b))
        pos = m.end
    out.append(text[pos:])
    return "".join(out)


def slot_substitutions(text: str, terms: TermSet, words: tuple[str, str]) -> tuple[str, str] | None:
    """The control pair: every identity-term occurrence replaced by ``words[0]`` in one text and ``words[1]`` in the
    other (same slot, same capitalisation). None when ``text`` mentions no term or has no valid counterfactual."""
    matches = find_terms(text, terms)
    if not matches or exclusion_reason(text, terms):
        return None
    outs = []
    for w in words:
        out, pos = [], 0
        for m in matches:
            out.append(text[pos:m.start])
            out.append(match_case(m.text, w))
            pos = m.end
        out.append(text[pos:])
        outs.append("".join(out))
    return outs[0], outs[1]


def mask_terms(text: str, terms: TermSet, token: str = IDENTITY_TOKEN) -> str:
    """Blindness: every identity-term occurrence replaced by one ``token`` (002 "Blindness")."""
    matches = find_terms(text, terms)
    if not matches:
        return text
    out, pos = [], 0
    for m in matches:
        out.append(text[pos:m.start])
        out.append(f" {token} ")
        pos = m.end
    out.append(text[pos:])
    return "".join(out)


def n_tokens(text: str) -> int:
    """Length in whitespace tokens (002 evaluates CTF on inputs of at most 10 tokens)."""
    return len(text.split())


@dataclass
class CounterfactualTable:
    """Rows (id, text, counterfactual, term, counterfactual_term) plus the texts left out and why."""

    rows: "object"          # pandas DataFrame
    excluded: "object"      # pandas DataFrame: id, text, reason
    n_texts: int
    n_with_terms: int
    terms: TermSet

    @property
    def n_excluded(self) -> int:
        return len(self.excluded)


def counterfactual_table(texts, terms: "TermSet | str", ids=None, progress: ProgressFn | None = None,
                         cancel: CancelToken | None = None) -> CounterfactualTable:
    """One row per (example, counterfactual): the future ``fairdesk-cli counterfactuals`` output.

    ``ids`` default to the row positions. Texts with no valid counterfactual are listed in ``excluded``.
    """
    import pandas as pd

    terms = load_terms(terms)
    rep = Reporter(progress, cancel)
    texts = ["" if t is None or (isinstance(t, float) and t != t) else str(t) for t in texts]
    ids = list(range(len(texts))) if ids is None else list(ids)
    if len(ids) != len(texts):
        raise DataError(f"{len(ids)} ids for {len(texts)} texts.")
    rows, excluded, with_terms = [], [], 0
    step = max(1, len(texts) // 100)
    for i, (rid, text) in enumerate(zip(ids, texts)):
        if i % step == 0:
            rep(i / max(len(texts), 1), f"counterfactuals {i:,}/{len(texts):,}")
        if not find_terms(text, terms):
            continue
        with_terms += 1
        reason = exclusion_reason(text, terms)
        if reason:
            excluded.append((rid, text, reason))
            continue
        for cf in counterfactuals(text, terms):
            rows.append((rid, text, cf.text, cf.term, cf.counterfactual_term))
    rep(1.0, "counterfactuals done")
    return CounterfactualTable(
        pd.DataFrame(rows, columns=["id", "text", "counterfactual", "term", "counterfactual_term"]),
        pd.DataFrame(excluded, columns=["id", "text", "reason"]), len(texts), with_terms, terms)
