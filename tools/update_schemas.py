"""Regenerate schemas/*.json from the models (tests fail while they are stale).

Usage: python tools/update_schemas.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def schemas() -> dict[str, dict[str, object]]:
    from gpuenv.lock.format import json_schema as lock_schema
    from gpuenv.spec import json_schema

    return {"gpuenv.schema.json": json_schema(), "gpuenv.lock.schema.json": lock_schema()}


def render(schema: dict[str, object]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main() -> int:
    for name, schema in schemas().items():
        path = REPO / "schemas" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(render(schema), encoding="utf-8")
        print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
