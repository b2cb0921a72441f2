"""Behaviour fingerprints of unexplained submissions: read, compared and grouped. Pure, no torch.

A submission whose outputs no known mistake explains (``wrong-output``) carries in its results
document a ``behaviour`` section (``grader.behaviour`` writes it at grading time): per
unexplained call and output, a few seed-independent words for how the output departs from the
reference's (``relation=scaled+1``, ``axis-1.sum=moved``...), the checks that failed, the
codes found, and the known mistakes whose variants depart most alike. A fingerprint is that
section as a set of tokens; two submissions that make the same mistake get the same set on any
seed, so the dashboard groups them by it (equal sets first, then near ones).

The web process reads fingerprints from stored documents, so this module imports no torch.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

BEHAVIOUR_VERSION = 1
UNEXPLAINED_CODE = "wrong-output"
"""The code of outputs no known mistake explains: the submissions fingerprints are for."""
NEAR = 0.05
"""Largest distance at which two fingerprints are grouped as one mistake: the share of their
tokens they may disagree on (measured in docs/results/unexplained-groups.md)."""

Key = TypeVar("Key", bound=Hashable)


@dataclass(frozen=True)
class NearMistake:
    """A known mistake whose variant departs from the reference most like the submission."""

    mistake: str
    code: str
    distance: float

    def to_json(self) -> dict[str, Any]:
        return {"mistake": self.mistake, "code": self.code, "distance": round(self.distance, 3)}


@dataclass(frozen=True)
class Fingerprint:
    """How one submission departs from the reference, as tokens; compared by ``distance``."""

    tokens: frozenset[str]
    nearest: tuple[NearMistake, ...] = ()
    """Not part of the identity: what the submission is closest to among the known mistakes."""

    @property
    def key(self) -> str:
        """A short name equal for equal token sets (an exact group's id in a URL)."""
        text = "\n".join(sorted(self.tokens))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def distance(self, other: Fingerprint) -> float:
        return distance(self.tokens, other.tokens)


def distance(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard distance: the share of the tokens either has that not both have (0 equal, 1
    nothing in common; two empty sets are equal)."""
    union = a | b
    if not union:
        return 0.0
    return 1.0 - len(a & b) / len(union)


def behaviour_section(calls: Mapping[str, Mapping[str, Sequence[str]]], *,
                      failed_checks: Iterable[str], codes: Iterable[str],
                      nearest: Sequence[NearMistake]) -> dict[str, Any]:
    """The document's ``behaviour`` section (JSON) from its parts."""
    return {
        "version": BEHAVIOUR_VERSION,
        "calls": {call: {output: sorted(words) for output, words in sorted(outputs.items())}
                  for call, outputs in sorted(calls.items())},
        "checks": sorted(set(failed_checks)),
        "codes": sorted(set(codes)),
        "nearest": [near.to_json() for near in nearest],
    }


def call_tokens(calls: Mapping[str, Mapping[str, Sequence[str]]]) -> frozenset[str]:
    """The tokens of the calls' departures: which calls depart, and per output position each
    kind of word's most common value over those calls (``0.1:axis-1.sum=moved``).

    The majority is what keeps a fingerprint equal across seeds: a word that one input flips
    (the largest entry of a row that two keys nearly share) is outvoted by the other calls."""
    tokens = {f"call:{call}" for call in calls}
    votes: dict[tuple[str, str], Counter[str]] = {}
    for outputs in calls.values():
        for output, words in outputs.items():
            for word in words:
                kind, _, value = word.partition("=")
                votes.setdefault((output, kind), Counter())[value] += 1
    for (output, kind), counted in votes.items():
        value = min(counted, key=lambda v: (-counted[v], v))
        tokens.add(f"{output}:{kind}={value}" if value else f"{output}:{kind}")
    return frozenset(tokens)


def fingerprint_of(document: Mapping[str, Any]) -> Fingerprint | None:
    """The fingerprint a results document stores, or None when it has none (no unexplained
    outputs, graded before fingerprints, or a section this version cannot read)."""
    section = document.get("behaviour")
    if not isinstance(section, Mapping) or section.get("version") != BEHAVIOUR_VERSION:
        return None
    calls = section.get("calls")
    if not isinstance(calls, Mapping):
        return None
    try:
        tokens = call_tokens({str(call): {str(output): [str(word) for word in words]
                                          for output, words in outputs.items()}
                              for call, outputs in calls.items()})
        tokens |= {f"check:{number}" for number in section.get("checks", ())}
        tokens |= {f"code:{code}" for code in section.get("codes", ())}
        nearest = tuple(NearMistake(str(near["mistake"]), str(near["code"]),
                                    float(near["distance"]))
                        for near in section.get("nearest", ()))
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return Fingerprint(frozenset(tokens), nearest)


@dataclass(frozen=True)
class Group(Generic[Key]):
    """Submissions whose fingerprints are equal or near: one mistake, as far as outputs tell."""

    representative: Key
    """The first member of the largest exact group: the submission to read first."""
    fingerprint: Fingerprint
    """The representative's fingerprint."""
    members: tuple[Key, ...]
    exact: int
    """How many members have exactly the representative's fingerprint."""
    spread: float
    """The largest distance of a member from the representative."""

    @property
    def size(self) -> int:
        return len(self.members)


def group(fingerprints: Sequence[tuple[Key, Fingerprint]], *,
          near: float = NEAR) -> list[Group[Key]]:
    """Group submissions by fingerprint, largest group first.

    Equal fingerprints form exact groups; exact groups, largest first, join the first group
    whose representative is within ``near`` of theirs, or start one. Every submission is in
    exactly one group, and the result does not depend on the order of the input beyond ties
    (broken by the order given)."""
    exact: dict[str, list[tuple[Key, Fingerprint]]] = {}
    for member, found in fingerprints:
        exact.setdefault(found.key, []).append((member, found))
    ordered = sorted(exact.values(), key=lambda same: (-len(same), same[0][1].key))
    leaders: list[tuple[Fingerprint, list[tuple[Key, Fingerprint]]]] = []
    for same in ordered:
        leader = same[0][1]
        home = next((members for found, members in leaders
                     if found.distance(leader) <= near), None)
        if home is None:
            leaders.append((leader, list(same)))
        else:
            home.extend(same)
    groups = []
    for found, members in leaders:
        groups.append(Group(
            representative=members[0][0], fingerprint=found,
            members=tuple(member for member, _ in members),
            exact=sum(1 for _, other in members if other.key == found.key),
            spread=max(found.distance(other) for _, other in members)))
    return sorted(groups, key=lambda g: -g.size)
