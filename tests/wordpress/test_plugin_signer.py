"""The plugin's statement signer reproduces the published vectors (docs/product-statements.md).

Runs the plugin's own class (wordpress/visitor-service/includes/class-statements.php) with the
PHP command line; it needs no WordPress.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIGNER = ROOT / "wordpress" / "visitor-service" / "includes" / "class-statements.php"
VECTORS = ROOT / "tests" / "privacy" / "statement_vectors.json"

SCRIPT = """<?php
define('ABSPATH', __DIR__ . '/');  // as inside WordPress: every plugin file checks it
require $argv[1];
$out = [];
foreach (json_decode(stream_get_contents(STDIN), true) as $v) {
    $out[] = [
        'key' => bin2hex(VisitorService\\Statements::key($v['api_key'])),
        'token' => VisitorService\\Statements::sign($v['api_key'], $v['product_id'], $v['page_url'],
            $v['issued_at'], $v['nonce']),
    ];
}
echo json_encode($out);
"""


def test_the_plugins_signer_reproduces_every_published_vector(tmp_path: Path) -> None:
    vectors = json.loads(VECTORS.read_text())
    script = tmp_path / "sign.php"
    script.write_text(SCRIPT)
    done = subprocess.run(["php", str(script), str(SIGNER)], input=json.dumps(vectors),
                          capture_output=True, text=True, check=True, timeout=30)
    signed = json.loads(done.stdout)
    assert [s["key"] for s in signed] == [v["derived_key_hex"] for v in vectors]
    assert [s["token"] for s in signed] == [v["token"] for v in vectors]
