"""Pages of a list, with the total: no list ever stops silently."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from service.core.errors import ServiceError

T = TypeVar("T")
PER_PAGE = 50
MAX_PER_PAGE = 500


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    total: int
    number: int
    """1-based."""
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))

    @property
    def first(self) -> int:
        """The position of the first item shown (1-based; 0 when there is none)."""
        return (self.number - 1) * self.per_page + 1 if self.items else 0

    @property
    def last(self) -> int:
        return self.first + len(self.items) - 1 if self.items else 0


def page_numbers(raw_page: str | None, raw_per_page: str | None) -> tuple[int, int]:
    """The page and page size asked for in a query string, checked."""
    try:
        number = int(raw_page) if raw_page else 1
        per_page = int(raw_per_page) if raw_per_page else PER_PAGE
    except ValueError:
        raise ServiceError("`page` and `per_page` must be whole numbers.") from None
    if number < 1 or not 1 <= per_page <= MAX_PER_PAGE:
        raise ServiceError(f"`page` starts at 1; `per_page` is between 1 and {MAX_PER_PAGE}.")
    return number, per_page


def paginate(items: Sequence[T], number: int, per_page: int) -> Page[T]:
    start = (number - 1) * per_page
    return Page(list(items[start:start + per_page]), len(items), number, per_page)
