"""Write the golden saved plan of format v1 (run once per format version;
never regenerate an existing version's files: they pin compatibility)."""

import json
import shutil
import tempfile
from pathlib import Path

from quanta.engine.execute import execute
from quanta.engine.storage.hdt import HdtStore

HERE = Path(__file__).parent
with tempfile.TemporaryDirectory() as tmp:
    copy = Path(tmp) / "watdiv-100k.hdt"
    shutil.copy(HERE.parents[3] / "data" / "watdiv-100k.hdt", copy)
    store = HdtStore(str(copy), name="watdiv-100k")
    page = execute(store, query=(HERE / "v1-join.rq").read_text(), quantum_seconds=None, max_results=5)
    assert page.next is not None
    (HERE / "v1-join.plan").write_bytes(page.next)
    rest = execute(store, saved=page.next, quantum_seconds=None)
    (HERE / "v1-join.rows.json").write_text(json.dumps([list(r) for r in rest.rows]) + "\n")
    print(len(page.next), "bytes,", len(rest.rows), "rows")
