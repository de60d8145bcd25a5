"""Worker deployment settings: config file, environment, flags, build ids, drain verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from weft._config import deployment_config
from weft.cli.main import run
from weft.client.deploys import DeployError, Deploys, DrainingThread, DrainReport, next_safe_point
from weft.definitions import load_directory
from weft.workers.config import ConfigError, DeploymentConfig, load_config
from weft.workers.deployment import default_build_id, deployment_version

DEFINITIONS = Path(__file__).parent.parent / "deploy_definitions"


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "weft.yml"
    path.write_text(text)
    return path


def test_the_deployment_comes_from_the_file_and_the_environment_wins(tmp_path):
    """`deployment:` in the file names the deployment; WEFT_DEPLOYMENT_NAME / WEFT_BUILD_ID
    override it."""
    path = write_config(tmp_path, "deployment:\n  name: shop\n  buildId: b1\n")
    assert load_config(path, environ={}).deployment.name == "shop"
    overridden = load_config(path, environ={"WEFT_DEPLOYMENT_NAME": "x", "WEFT_BUILD_ID": "b2"})
    assert (overridden.deployment.name, overridden.deployment.build_id) == ("x", "b2")


def test_a_deployment_name_with_a_dot_is_refused_naming_the_field(tmp_path):
    """Temporal spells a version `name.build`, so a dotted name is refused at load."""
    path = write_config(tmp_path, "deployment:\n  name: shop.eu\n")
    with pytest.raises(ConfigError, match=r"deployment\.name"):
        load_config(path, environ={})


def test_without_a_name_the_worker_is_unversioned():
    """No deployment name: no version; a build id alone is a mistake, said so."""
    definitions = load_directory(DEFINITIONS)
    assert deployment_version(DeploymentConfig(), definitions) is None
    with pytest.raises(ConfigError, match="buildId is set without deployment.name"):
        deployment_version(DeploymentConfig(build_id="b1"), definitions)


def test_the_default_build_id_follows_the_definitions():
    """The same definitions give the same build id; a changed prompt gives another."""
    definitions = load_directory(DEFINITIONS)
    version = deployment_version(DeploymentConfig(name="shop"), definitions)
    assert version is not None and version.build_id == default_build_id(definitions)
    assert version.build_id.startswith("weft-")
    changed = load_directory(DEFINITIONS)
    prompt = changed.prompts["deploy_prompt"]
    changed.prompts["deploy_prompt"] = prompt.model_copy(update={"prompt": "Another prompt."})
    assert default_build_id(changed) != version.build_id


def test_the_python_api_arguments_override_the_config():
    """`weft.Worker(deployment=, build_id=, set_current=)` over the config's section."""
    base = DeploymentConfig(name="shop", build_id="b1")
    merged = deployment_config(base, name=None, build_id="b2", set_current=True)
    assert (merged.name, merged.build_id, merged.set_current_on_start) == ("shop", "b2", True)
    with pytest.raises(ValidationError, match="name"):
        deployment_config(base, name="a.b", build_id=None, set_current=None)


def test_a_deploy_command_without_a_deployment_says_how_to_name_one(tmp_path, capsys):
    """`weft deploy status` with no deployment configured is one line and exit 1."""
    path = write_config(tmp_path, "temporal:\n  address: 127.0.0.1:1\n")
    assert run(["--config", str(path), "deploy", "status"]) == 1
    assert "give --deployment NAME or set deployment.name" in capsys.readouterr().err


def test_a_bad_worker_flag_is_one_line_naming_it(tmp_path, capsys):
    """`weft worker --deployment a.b` fails before connecting, naming the flag (exit 2)."""
    path = write_config(tmp_path, f"definitions: {DEFINITIONS}\n")
    with pytest.raises(SystemExit) as exited:
        run(["--config", str(path), "worker", "--deployment", "a.b"])
    assert exited.value.code == 2
    assert "argument --deployment" in capsys.readouterr().err


def test_each_thread_kind_is_told_when_it_moves():
    """The drain report's safe point depends on what the thread waits for."""
    assert "person answers its tool_permission" in next_safe_point(
        "waiting_permission", "tool_permission"
    )
    assert next_safe_point("running", None) == "when its running turn ends"
    assert "--wake" in next_safe_point("waiting_input", None)


def test_a_version_may_stop_only_when_drained_and_not_routed():
    """Current, ramping or with open threads: the version's workers must keep running."""
    thread = DrainingThread("t", "a", "waiting_input", None, "later")
    assert DrainReport("v1", current=False, ramping=False, threads=[]).may_stop
    assert not DrainReport("v1", current=True, ramping=False, threads=[]).may_stop
    assert not DrainReport("v1", current=False, ramping=True, threads=[]).may_stop
    assert not DrainReport("v1", current=False, ramping=False, threads=[thread]).may_stop


def test_a_dotted_deployment_name_is_refused_by_the_client():
    """`Deploys` refuses a name Temporal could not parse back."""
    with pytest.raises(DeployError, match="without dots"):
        Deploys(None, "a.b")  # type: ignore[arg-type]
