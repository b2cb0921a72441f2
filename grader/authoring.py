"""Proving an assignment sound for its author: the mistake-coverage table.

The reference must get full marks; every known mistake, and every pair of mistakes that can
co-occur (whatever their codes), must lose points and be diagnosed with exactly its own codes.
Pairs that cannot co-occur are counted, never silently left out. Variants run in this process
(they are our own code), through the same judging as a sandboxed submission.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Hashable, Iterable, Iterator, Mapping, MutableMapping, Set
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from assignments import Assignment, ProbePlan
from grader.compare import EVIDENCE_MARGIN, call_departure
from grader.in_process import run_call_in_process, run_in_process
from grader.mistake_search import co_occurring_pairs
from grader.outcomes import CallOutcome
from grader.pipeline import VariantKey, judge_outcomes, reference_outcomes, use_one_thread


@dataclass(frozen=True)
class CoverageRow:
    mistakes: tuple[str, ...]
    expected: frozenset[str]
    diagnosed: frozenset[str]
    score: float
    max_score: float
    failed_checks: tuple[tuple[str, str, str], ...] = ()
    """(number, name, what the grader saw) of every check that lost points."""

    @property
    def ok(self) -> bool:
        if not self.mistakes:
            return self.score == self.max_score and not self.diagnosed
        return self.score < self.max_score and self.diagnosed == self.expected


@dataclass(frozen=True)
class CoverageReport:
    slug: str
    seed: int
    rows: tuple[CoverageRow, ...]
    """The reference, each mistake, and every pair that can co-occur."""
    excluded: tuple[tuple[str, str], ...] = ()
    """The pairs not examined: one member declares the other in ``excludes``."""
    blind_spots: tuple[str, ...] = ()
    """Where a failing row's mistakes do not show on the probes: a mistake no call moves by
    the evidence margin, or two mistakes of different codes no call tells apart."""

    @property
    def skipped(self) -> tuple[tuple[str, str], ...]:
        """The pairs of mistakes neither examined nor declared unable to co-occur."""
        mistakes = [row.mistakes[0] for row in self.rows if len(row.mistakes) == 1]
        accounted = {frozenset(row.mistakes) for row in self.rows if len(row.mistakes) == 2}
        accounted |= {frozenset(pair) for pair in self.excluded}
        return tuple((a, b) for i, a in enumerate(mistakes) for b in mistakes[i + 1:]
                     if frozenset({a, b}) not in accounted)

    @property
    def sound(self) -> bool:
        """The reference is right, and every mistake and every pair that can co-occur is
        examined and right: a pair skipped is a pair not proven."""
        return (any(not row.mistakes for row in self.rows) and not self.skipped
                and all(row.ok for row in self.rows))

    def explanations(self) -> list[str]:
        """Every failing row in the author's terms: which mistake, which check, what was seen."""
        lines: list[str] = []
        for row in self.rows:
            if row.ok:
                continue
            lines.extend(explain(row))
        return lines

    def render(self) -> str:
        singles = [row for row in self.rows if len(row.mistakes) <= 1]
        pairs = [row for row in self.rows if len(row.mistakes) == 2]
        lines = [f"Mistake coverage for {self.slug} (seed {self.seed})", ""]
        lines.append(f"  {'variant':<30} {'expected codes':<28} {'score':>9}  result")
        for row in singles:
            name = row.mistakes[0] if row.mistakes else "(reference)"
            expected = ", ".join(sorted(row.expected)) or "-"
            lines.append(f"  {name:<30} {expected:<28} {row.score:>4g}/{row.max_score:g}  "
                         f"{'ok' if row.ok else 'WRONG: ' + _codes(row.diagnosed)}")
        bad_pairs = [row for row in pairs if not row.ok]
        lines.append("")
        skipped = self.skipped
        total = len(pairs) + len(self.excluded) + len(skipped)
        lines.append(f"  pairs of mistakes: {total}; examined {len(pairs)}, of which "
                     f"{len(pairs) - len(bad_pairs)} diagnosed with exactly their codes")
        lines.append(f"  not examined: {len(self.excluded)} that cannot co-occur (declared in "
                     f"excludes), {len(skipped)} skipped")
        lines.extend(f"    SKIPPED {a} + {b}: never graded, so not proven" for a, b in skipped)
        for row in bad_pairs:
            lines.append(f"    WRONG {' + '.join(row.mistakes)}: expected "
                         f"{_codes(row.expected)}, got {_codes(row.diagnosed)} "
                         f"({row.score:g}/{row.max_score:g})")
        if not self.sound:
            lines.append("")
            lines.append("Why:")
            lines.extend(f"  {line}" for line in self.explanations())
        if self.blind_spots:
            lines.append("")
            lines.append("What the probes cannot show:")
            lines.extend(f"  {line}" for line in self.blind_spots)
        lines.append("")
        lines.append("sound" if self.sound else "NOT sound: see the rows marked WRONG or SKIPPED")
        return "\n".join(lines)


UNEXPLAINED = "wrong-output"
"""The code of outputs no known mistake explains: no variant is to blame for it."""


def explain(row: CoverageRow) -> list[str]:
    """What went wrong in one failing row, and what to change."""
    failed = [f"    check {number} ({name}) lost points: {seen or 'no observation'}"
              for number, name, seen in row.failed_checks]
    if not row.mistakes:
        lines = [f"- the reference itself scores {row.score:g}/{row.max_score:g}"
                 + (f" and is diagnosed {_codes(row.diagnosed)}" if row.diagnosed else "")
                 + ": the checks disagree with the reference (a check's calls, kind or the "
                 "probe inputs are wrong)."]
        return lines + failed
    name = " + ".join(row.mistakes)
    if row.score >= row.max_score:
        return [f"- mistake {name} scores full marks: either its variant in reference.py changes "
                "nothing (is its `if` reached?), or no check looks at what it changes: add a "
                "probe call it changes to a check's calls, or a check of another kind."]
    missing = row.expected - row.diagnosed
    extra = row.diagnosed - row.expected
    lines = [f"- mistake {name} loses points ({row.score:g}/{row.max_score:g}) but is "
             f"diagnosed {_codes(row.diagnosed)}, not {_codes(row.expected)}:"]
    if missing:
        lines.append(f"    not recognised: {_codes(frozenset(missing))} — its variant's outputs do "
                     "not stand out on the probes (searched=True needs a call where its "
                     "forward values differ from the reference and from the other variants)")
    unexplained = extra & {UNEXPLAINED}
    if extra - unexplained:
        lines.append(f"    also diagnosed: {_codes(frozenset(extra - unexplained))} — another "
                     "variant explains the same outputs (make the probes tell them apart, or "
                     "declare them in excludes if they cannot co-occur)")
    if unexplained:
        lines.append(f"    also diagnosed: {UNEXPLAINED} — no single smallest set of known "
                     "mistakes explains the outputs of some scenario: variants of different "
                     "codes give the same outputs there, or a mistake moves them too little to "
                     "be evidence (make a probe where they differ, or where the mistake shows "
                     "more)")
    return lines + failed


def _codes(codes: frozenset[str]) -> str:
    return ", ".join(sorted(codes)) or "none"


def coverage_report(assignment: Assignment, *, seed: int = 0, workers: int = 1) -> CoverageReport:
    """The coverage table of ``assignment`` on the probe plan of ``seed``. With ``workers`` > 1
    the rows are computed in that many fresh processes (each loads the package itself); the
    report is the same."""
    use_one_thread()
    pairs = co_occurring_pairs(assignment.mistakes)
    combinations: list[tuple[str, ...]] = [(), *((m.id,) for m in assignment.mistakes),
                                           *((a.id, b.id) for a, b in pairs)]
    if workers > 1 and len(combinations) > workers:
        rows = _rows_in_processes(assignment, seed, combinations, workers)
    else:
        rows = _rows(assignment, seed, combinations)
    examined = {(a.id, b.id) for a, b in pairs}
    mistakes = assignment.mistakes
    excluded = tuple((a.id, b.id) for i, a in enumerate(mistakes) for b in mistakes[i + 1:]
                     if (a.id, b.id) not in examined)
    report = CoverageReport(assignment.slug, seed, tuple(rows), excluded)
    if report.sound:
        return report
    return replace(report, blind_spots=tuple(_BlindSpots(assignment, seed).of(report.rows)))


@dataclass(frozen=True)
class Separation:
    """How far apart the probes show two behaviours: the call on which their forward values
    stand furthest apart, and by how many tolerances (``compare.call_departure``)."""

    call: str
    tolerances: float

    @property
    def evidence(self) -> bool:
        """Whether that is far enough for the search to tell them apart."""
        return self.tolerances > EVIDENCE_MARGIN


def separation(first: Mapping[str, CallOutcome],
               second: Mapping[str, CallOutcome]) -> Separation:
    """The call of ``first`` (in its order) on which ``second`` stands furthest from it."""
    best = Separation("", 0.0)
    for call_id, outcome in first.items():
        if call_id in second:
            tolerances = call_departure(second[call_id], outcome)
            if tolerances > best.tolerances:
                best = Separation(call_id, tolerances)
    return best


class _BlindSpots:
    """What the probes cannot show of the mistakes of failing rows, each measured beside the
    row's other mistakes (a float32 answer hides what a float64 call would show). Each set of
    mistakes runs once, in this process, on the report's plan; only the calls compared value
    by value count (the search reads no other: a random call's numbers differ by chance, a
    property's by design)."""

    def __init__(self, assignment: Assignment, seed: int) -> None:
        self._assignment = assignment
        self._plan = assignment.build_plan(seed)
        self._valued = {c.id for c in self._plan.calls if c.compare == "values"}
        self._runs: dict[frozenset[str], dict[str, CallOutcome]] = {}
        self._searched = [m for m in assignment.mistakes if m.searched]
        self._code = {m.id: m.code for m in assignment.mistakes}

    def of(self, rows: tuple[CoverageRow, ...]) -> list[str]:
        """One line per blind spot behind the failing rows, each said once."""
        lines: dict[str, None] = {}
        for row in rows:
            if row.ok or not row.mistakes:
                continue
            ids = frozenset(row.mistakes)
            mine = [m for m in row.mistakes if self._assignment.mistake(m).searched]
            unnamed = row.expected - row.diagnosed
            for mistake in mine:
                if self._code[mistake] in unnamed or UNEXPLAINED in row.diagnosed:
                    lines.update(dict.fromkeys(self._unseen(mistake, ids)))
            for extra in row.diagnosed - row.expected - {UNEXPLAINED}:
                for other in (m.id for m in self._searched if m.code == extra):
                    lines.update(dict.fromkeys(
                        line for mistake in mine
                        if (line := self._confused(ids, ids - {mistake} | {other}))))
        return list(lines)

    def _unseen(self, mistake: str, ids: frozenset[str]) -> list[str]:
        """Why ``mistake`` may not be named beside the rest of ``ids``: it barely moves any
        call, or no call tells it from a mistake of another code."""
        rest = ids - {mistake}
        shown = separation(self._run(rest), self._run(ids))
        if not shown.evidence:
            beside = f" beside {' + '.join(sorted(rest))}" if rest else ""
            where = (f"at most {shown.tolerances:.3g} on call {self._call(shown.call)}"
                     if shown.call else "none at all")
            return [f"- {mistake}{beside} moves no call's outputs by more than "
                    f"{EVIDENCE_MARGIN:g} tolerances, the least that is evidence: {where}. "
                    "Add a call on whose input the step it changes matters more: values of "
                    "the size of an epsilon it misplaces, beyond a threshold or cap it gets "
                    "wrong, larger or longer inputs where an error accumulates; in float64, "
                    "whose tolerance is far finer than float32's."]
        return [line for other in self._searched
                if other.code != self._code[mistake] and other.id not in ids
                if (line := self._confused(ids, rest | {other.id}))]

    def _confused(self, ids: frozenset[str], others: frozenset[str]) -> str:
        """A line when no call tells the two sets of mistakes apart, else nothing."""
        if ids == others:
            return ""
        shown = separation(self._run(ids), self._run(others))
        if shown.evidence:
            return ""
        where = (f"at most {shown.tolerances:.3g} tolerances apart, on call "
                 f"{self._call(shown.call)}" if shown.call else "the same on every call")
        return (f"- no call tells {self._named(ids)} from {self._named(others)}: their "
                f"outputs are {where}; evidence needs more than {EVIDENCE_MARGIN:g}. Add a "
                "call on whose input the steps they change give different values.")

    def _named(self, ids: frozenset[str]) -> str:
        return " + ".join(f"{m} ({self._code[m]})" for m in sorted(ids))

    def _call(self, call_id: str) -> str:
        return f"{call_id} ({self._plan.call(call_id).describe})"

    def _run(self, ids: frozenset[str]) -> dict[str, CallOutcome]:
        """The value-compared calls of the reference with these mistakes switched on."""
        if ids not in self._runs:
            outcomes = (run_in_process(self._assignment.reference(ids), self._plan) if ids
                        else reference_outcomes(self._assignment, self._plan))
            self._runs[ids] = {c: o for c, o in outcomes.items() if c in self._valued}
        return self._runs[ids]


def _rows_in_processes(assignment: Assignment, seed: int,
                       combinations: list[tuple[str, ...]], workers: int) -> list[CoverageRow]:
    """The rows of ``combinations``, in order, from ``workers`` spawned processes (a fork of a
    process that may hold threads and connections is not safe)."""
    chunks = [combinations[i::workers] for i in range(workers)]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        results = list(pool.map(_rows_of_chunk, [assignment.slug] * workers,
                                [assignment.root.parent] * workers, [seed] * workers, chunks))
    by_combination = {row.mistakes: row for chunk in results for row in chunk}
    return [by_combination[ids] for ids in combinations]


def _rows_of_chunk(slug: str, root: Path, seed: int,
                   combinations: list[tuple[str, ...]]) -> list[CoverageRow]:
    from grader.loader import load_assignment

    use_one_thread()
    return _rows(load_assignment(slug, root=root), seed, combinations)


def _rows(assignment: Assignment, seed: int,
          combinations: list[tuple[str, ...]]) -> list[CoverageRow]:
    """The rows of ``combinations`` on one plan: the reference and each variant run once for
    all of them."""
    plan = assignment.build_plan(seed)
    runs = _Runs(assignment, plan, reference_outcomes(assignment, plan))
    return [_row(assignment, plan, ids, runs) for ids in combinations]


class _Runs:
    """What the reference and the variants return on the report's plan, each call run once
    for every set of mistakes on which it runs alike: a call whose code asked only about
    switches on which two sets of mistakes agree ran exactly as it would with the other."""

    def __init__(self, assignment: Assignment, plan: ProbePlan,
                 reference: dict[str, CallOutcome]) -> None:
        self._assignment = assignment
        self._plan = plan
        self.reference = reference
        self.variants = _Variants(self)
        self._runs: dict[tuple[str, bool], list[_Traced]] = {}

    def student(self, ids: frozenset[str]) -> dict[str, CallOutcome]:
        """Every call of the plan with the mistakes ``ids`` switched on, gradients included."""
        return {call.id: self.run(ids, call.id, True) for call in self._plan.calls}

    def run(self, ids: frozenset[str], call_id: str, backward: bool) -> CallOutcome:
        """One call with the mistakes ``ids`` switched on (``backward``: gradients too)."""
        runs = self._runs.setdefault((call_id, backward), [])
        for run in runs:
            if run.same_for(ids):
                return run.outcome
        switches = _Switches(ids)
        # The reference's code reads its switches only through the set it is given.
        namespace = self._assignment.reference(cast(frozenset[str], switches))
        outcome = run_call_in_process(namespace, self._plan, call_id, backward=backward)
        runs.append(_Traced(ids, switches.asked, outcome))
        return outcome

    def keep(self, ids: frozenset[str], call_id: str, backward: bool,
             outcome: CallOutcome) -> None:
        """An outcome run elsewhere, for these very mistakes only."""
        self._runs.setdefault((call_id, backward), []).insert(0, _Traced(ids, None, outcome))

    def known(self) -> Iterator[VariantKey]:
        for (call_id, backward), runs in self._runs.items():
            yield from ((run.ids, call_id, backward) for run in runs)


class _Variants(MutableMapping[VariantKey, CallOutcome]):
    """The variants' outcomes as ``judge_outcomes`` keeps them: every (mistakes, call,
    gradients) of the plan has one, run when first read."""

    def __init__(self, runs: _Runs) -> None:
        self._runs = runs

    def __getitem__(self, key: VariantKey) -> CallOutcome:
        mistakes, call_id, backward = key
        return self._runs.run(mistakes, call_id, backward)

    def __setitem__(self, key: VariantKey, outcome: CallOutcome) -> None:
        mistakes, call_id, backward = key
        self._runs.keep(mistakes, call_id, backward, outcome)

    def __delitem__(self, key: VariantKey) -> None:
        raise TypeError("variant outcomes are kept for the whole report")

    def __iter__(self) -> Iterator[VariantKey]:
        return self._runs.known()

    def __len__(self) -> int:
        return sum(1 for _ in self._runs.known())


@dataclass(frozen=True)
class _Traced:
    """One run of a call, and which switches its code asked about (None: it read the whole
    set, so only the same mistakes run alike)."""

    ids: frozenset[str]
    asked: frozenset[str] | None
    outcome: CallOutcome

    def same_for(self, ids: frozenset[str]) -> bool:
        """Whether a run with ``ids`` switched on gets the same answer to every question."""
        if self.asked is None:
            return ids == self.ids
        return ids & self.asked == self.ids & self.asked


class _Switches(Set[str], Hashable):
    """The mistakes switched on, as the reference's code reads them, noting what it learns:
    which switches it asked about, or (``asked`` None) that it read the whole set (iterated it,
    counted it, compared it, hashed it). It answers every question as the frozenset would."""

    def __init__(self, ids: frozenset[str]) -> None:
        self._ids = ids
        self._asked: set[str] | None = set()

    @property
    def asked(self) -> frozenset[str] | None:
        return None if self._asked is None else frozenset(self._asked)

    def _read_whole(self) -> frozenset[str]:
        self._asked = None
        return self._ids

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> frozenset[Any]:
        return frozenset(it)

    def __contains__(self, switch: object) -> bool:
        if self._asked is not None and isinstance(switch, str):
            self._asked.add(switch)
        elif not isinstance(switch, str):
            self._read_whole()
        return switch in self._ids

    def __iter__(self) -> Iterator[str]:
        return iter(self._read_whole())

    def __len__(self) -> int:
        return len(self._read_whole())

    def __hash__(self) -> int:
        return hash(self._read_whole())

    def __repr__(self) -> str:
        return repr(self._read_whole())

    def __reduce__(self) -> tuple[Any, ...]:
        return frozenset, (self._read_whole(),)

    def intersection(self, *others: Iterable[Any]) -> frozenset[Any]:
        """What the named switches have in common with these: only those are asked about."""
        if not others:
            return self._read_whole()
        common: frozenset[Any] = frozenset(s for s in frozenset().union(*others) if s in self)
        for other in others:
            common &= frozenset(other)
        return common

    def union(self, *others: Iterable[Any]) -> frozenset[Any]:
        return self._read_whole().union(*others)

    def difference(self, *others: Iterable[Any]) -> frozenset[Any]:
        return self._read_whole().difference(*others)

    def symmetric_difference(self, other: Iterable[Any]) -> frozenset[Any]:
        return self._read_whole().symmetric_difference(other)

    def issubset(self, other: Iterable[Any]) -> bool:
        return self._read_whole().issubset(other)

    def issuperset(self, other: Iterable[Any]) -> bool:
        return self._read_whole().issuperset(other)

    def copy(self) -> frozenset[str]:
        return self._read_whole()


def _row(assignment: Assignment, plan: ProbePlan, ids: tuple[str, ...],
         runs: _Runs) -> CoverageRow:
    student = runs.student(frozenset(ids))
    scored, diagnoses, *_ = judge_outcomes(assignment, plan, student, reference=runs.reference,
                                          variants=runs.variants)
    return CoverageRow(
        mistakes=ids,
        expected=frozenset(assignment.mistake(m).code for m in ids),
        diagnosed=frozenset(d.code for d in diagnoses),
        score=sum(score for _, _, score in scored),
        max_score=assignment.max_score,
        failed_checks=tuple((check.number, check.name, verdict.observation)
                            for check, verdict, score in scored if score < check.points),
    )
