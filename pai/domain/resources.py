"""Resources: GPU, CPU and memory amounts with the arithmetic the scheduler needs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Resources:
    gpu: int = 0
    cpu: int = 0
    memory_mb: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.gpu + other.gpu, self.cpu + other.cpu, self.memory_mb + other.memory_mb)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.gpu - other.gpu, self.cpu - other.cpu, self.memory_mb - other.memory_mb)

    def __mul__(self, n: int) -> Resources:
        return Resources(self.gpu * n, self.cpu * n, self.memory_mb * n)

    def fits_in(self, other: Resources) -> bool:
        """True when every amount is at most the other's."""
        return self.gpu <= other.gpu and self.cpu <= other.cpu and self.memory_mb <= other.memory_mb

    def is_negative(self) -> bool:
        return self.gpu < 0 or self.cpu < 0 or self.memory_mb < 0

    def clamp0(self) -> Resources:
        return Resources(max(self.gpu, 0), max(self.cpu, 0), max(self.memory_mb, 0))

    def describe(self) -> str:
        return f"{self.gpu} GPU, {self.cpu} CPU, {self.memory_mb} MB"

    def to_dict(self) -> dict[str, int]:
        return {"gpu": self.gpu, "cpu": self.cpu, "memoryMB": self.memory_mb}

    @classmethod
    def from_dict(cls, d: dict[str, int]) -> Resources:
        return cls(int(d.get("gpu", 0)), int(d.get("cpu", 0)), int(d.get("memoryMB", 0)))


ZERO = Resources()
