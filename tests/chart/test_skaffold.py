"""skaffold.yaml (no skaffold binary here): it is valid under skaffold's own JSON schema of its config,
builds the three images as targets of the Dockerfile, each running as non-root, its setValueTemplates
name real chart values, and each profile's values render valid objects."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from .conftest import tool

ROOT = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((ROOT / "skaffold.yaml").read_text())


def validate(config: str) -> subprocess.CompletedProcess[str]:
    """kubeconform with skaffold's schema of its config (from skaffold's module, scripts/k8s/tools.sh)."""
    schema = tool("skaffold-schema.json").resolve()
    command = [str(tool("kubeconform")), "-summary", "-schema-location", str(schema), "-"]
    return subprocess.run(command, input=config, capture_output=True, text=True, timeout=60)


def test_valid_under_skaffolds_schema_which_refuses_a_misspelt_key() -> None:
    text = (ROOT / "skaffold.yaml").read_text()
    assert f"apiVersion: skaffold/{tool('skaffold-schema.json').resolve().stem}" in text
    done = validate(text)
    assert done.returncode == 0 and "Valid: 1, Invalid: 0" in done.stdout, done.stdout + done.stderr
    misspelt = validate(text.replace("setValueTemplates:", "setValueTemplate:"))
    assert misspelt.returncode == 1 and "additional properties 'setValueTemplate' not allowed" in misspelt.stdout


def test_three_images_from_the_dockerfiles_targets_with_base_images_as_build_args() -> None:
    assert CONFIG["apiVersion"] == "skaffold/v4beta13"
    artifacts = {a["image"]: a for a in CONFIG["build"]["artifacts"]}
    assert sorted(artifacts) == ["quanta-gateway", "quanta-loader", "quanta-worker"]
    for image, artifact in artifacts.items():
        dockerfile = ROOT / artifact["context"] / artifact["docker"]["dockerfile"]
        assert dockerfile.exists(), image
        text = dockerfile.read_text()
        stages = {name: body for name, body in re.findall(r"^FROM \S+ AS (\S+)\n((?:(?!FROM ).*\n)*)", text, re.M)}
        # every image's stage is built on `runtime`, which runs as a non-root user
        assert re.search(rf"^FROM runtime AS {artifact['docker']['target']}$", text, re.M), image
        assert "USER 10001:10001" in stages["runtime"] and "USER" not in text.replace(stages["runtime"], "")
        for arg in artifact["docker"]["buildArgs"]:
            assert f"ARG {arg}=" in text, (image, arg)
        assert "HEALTHCHECK" not in text


def test_set_value_templates_name_real_values_and_render(render, one) -> None:
    (release,) = CONFIG["deploy"]["helm"]["releases"]
    values: dict[str, dict[str, dict[str, str]]] = {}
    for key, template in release["setValueTemplates"].items():
        top, role, field = key.split(".")
        assert top == "images" and "IMAGE_" in template
        values.setdefault(top, {}).setdefault(role, {})[field] = (
            f"registry.example/{role}" if field == "repository" else "abc123"
        )
    docs = render(values)  # the strict schema would refuse a wrong key
    image = one(docs, "Deployment", "-worker")["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "registry.example/worker:abc123"


@pytest.mark.parametrize("profile", ["local", "production"])
def test_each_profile_renders_valid_objects(render, profile: str) -> None:
    (entry,) = [p for p in CONFIG["profiles"] if p["name"] == profile]
    (patch,) = entry["patches"]
    assert patch["path"] == "/deploy/helm/releases/0/valuesFiles"
    merged: dict[str, object] = {}
    for path in patch["value"]:
        merged |= yaml.safe_load((ROOT / path).read_text())
    kinds = {d["kind"] for d in render(merged)}
    assert ("ScaledObject" in kinds) == (profile == "production")
