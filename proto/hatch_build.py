"""Generate *_pb2.py and .pyi stubs from the .proto files at build time (never committed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


def generate(root: Path) -> list[Path]:
    """Compile every .proto under `root/quanta`; return the generated files."""
    import grpc_tools
    from grpc_tools import protoc

    protos = sorted(str(p.relative_to(root)) for p in (root / "quanta").rglob("*.proto"))
    include = Path(grpc_tools.__file__).parent / "_proto"
    args = ["protoc", f"-I{root}", f"-I{include}", f"--python_out={root}", f"--pyi_out={root}", *protos]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {protos}")
    return sorted((root / "quanta").rglob("*_pb2.py*"))


class ProtoBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        generate(Path(self.root))


if __name__ == "__main__":
    for path in generate(Path(__file__).parent):
        print(path)
