"""docker-compose.yml against the CLI: services, commands, variables and exposure."""

from __future__ import annotations

import re

import pytest
import yaml
from typer.testing import CliRunner

from tests.conftest import ROOT
from tuner.cli import app
from workers.celery_app import InsecureBrokerError
from workers.celery_app import check_broker_url

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
OURS = {name: s for name, s in SERVICES.items() if s.get("image") == "kernel-tuner-service:latest"}


def _substitute(value: str) -> str:
    """Resolve ${VAR:-default} and ${VAR:?message} as compose would with VAR=secret."""
    value = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)
    return re.sub(r"\$\{[A-Z_]+:\?[^}]*\}", "secret", value)


def test_every_role_is_deployed():
    assert {"redis", "postgres", "scheduler", "worker-cpu", "dashboard", "migrate"} <= set(
        SERVICES)
    gpu_workers = [n for n in OURS if n.startswith("worker-gpu")]
    assert len(gpu_workers) >= 2
    ids = []
    for name in gpu_workers:
        (device,) = SERVICES[name]["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
        assert len(device["device_ids"]) == 1
        ids += device["device_ids"]
        assert SERVICES[name]["command"] == ["worker", "--device", "cuda:0"]
    assert len(set(ids)) == len(ids)  # one service per GPU


@pytest.mark.parametrize("service", sorted(OURS))
def test_commands_are_valid_cli_invocations(service):
    command = OURS[service]["command"]
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output


def test_variables_are_the_ones_the_service_reads_and_documents():
    settings_source = (ROOT / "tuner" / "core" / "settings.py").read_text()
    readme = (ROOT / "README.md").read_text()
    env = OURS["scheduler"]["environment"]
    assert {"TUNER_DB_URL", "TUNER_BROKER_URL"} <= set(env)
    for name in env:
        assert f'"{name}"' in settings_source, f"{name} is not read by Settings.from_env"
        assert f"`{name}`" in readme, f"{name} is not documented in the README"
    for name in set(re.findall(r'"(TUNER_[A-Z_]+)"', settings_source)):
        assert f"`{name}`" in readme, f"{name} is not documented in the README"
    services = {n: s for n, s in OURS.items() if n != "migrate"}
    assert all(s["environment"] == env for s in services.values())
    check_broker_url(_substitute(env["TUNER_BROKER_URL"]))  # has a password


def test_least_privilege_roles_and_migration_first():
    """Only `migrate` connects as the role that owns the schema; everything else connects as
    the row-only service role, after the migration exited 0; no one as the superuser."""
    migrate_url = OURS["migrate"]["environment"]["TUNER_DB_URL"]
    assert migrate_url.startswith("postgresql://tuner_migrate:")
    for name, service in OURS.items():
        if name == "migrate":
            continue
        assert service["environment"]["TUNER_DB_URL"].startswith("postgresql://tuner_service:")
        assert service["depends_on"]["migrate"] == {
            "condition": "service_completed_successfully"}, name
    postgres = SERVICES["postgres"]
    assert any("init-roles.sh:/docker-entrypoint-initdb.d/" in v for v in postgres["volumes"])
    assert (ROOT / "db" / "postgres" / "init-roles.sh").exists()


def test_only_loopback_ports_are_published():
    assert "ports" not in SERVICES["redis"]
    for name, service in SERVICES.items():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond the host"


@pytest.mark.parametrize(("url", "ok"), [
    ("redis://127.0.0.1:6379/0", True),
    ("redis://localhost/0", True),
    ("redis://:pw@redis:6379/0", True),
    ("rediss://user:pw@cache.example.com:6380/0", True),
    ("redis://redis:6379/0", False),
    ("amqp://guest:guest@rabbit//", False),
])
def test_broker_without_credentials_off_loopback_is_refused(url, ok):
    if ok:
        check_broker_url(url)
    else:
        with pytest.raises(InsecureBrokerError):
            check_broker_url(url)


def test_the_fleet_image_can_compile_and_write_its_volumes():
    """Triton compiles its CUDA driver stub with a C compiler at first use; the volumes the
    services write are created in the image and owned by its user."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "gcc" in dockerfile and "libc6-dev" in dockerfile
    assert "/artifacts" in dockerfile and "chown -R tuner /cache /kernels /artifacts" in dockerfile
    assert "-c constraints.txt" in dockerfile


def test_host_ports_are_configurable_and_do_not_clash_by_default():
    published = {name: port for name, s in SERVICES.items() for port in s.get("ports", [])}
    assert set(published) == {"postgres", "dashboard", "flower"}
    defaults = {}
    for name, port in published.items():
        match = re.fullmatch(r"127\.0\.0\.1:\$\{(TUNER_[A-Z_]+_HOST_PORT):-(\d+)\}:\d+", port)
        assert match, f"{name} publishes {port} with no variable"
        defaults[name] = int(match.group(2))
    assert defaults["postgres"] != 5432  # a host PostgreSQL keeps its port


def test_env_example_names_every_variable_compose_reads():
    compose_text = (ROOT / "docker-compose.yml").read_text()
    wanted = set(re.findall(r"\$\{([A-Z_]+)[:}]", compose_text))
    example = (ROOT / ".env.example").read_text()
    given = set(re.findall(r"^([A-Z_]+)=", example, flags=re.M))
    assert wanted <= given, wanted - given
    assert ".env" in (ROOT / ".gitignore").read_text().splitlines()


def test_flower_watches_the_broker_and_tasks_send_events():
    from tuner.core.settings import Settings
    from workers.celery_app import celery_config

    flower = SERVICES["flower"]
    assert "redis" in flower["depends_on"]
    assert flower["environment"]["CELERY_BROKER_URL"].startswith("redis://:${REDIS_PASSWORD")
    conf = celery_config(Settings.from_env({}))
    assert conf["worker_send_task_events"] and conf["task_send_sent_event"]


class _ComposeLoader(yaml.SafeLoader):  # type: ignore[misc]
    """Compose's ``!reset`` (drop the value of the file below) read as None."""


_ComposeLoader.add_constructor("!reset", lambda loader, node: None)
LOOPBACK = yaml.load((ROOT / "docker-compose.loopback.yml").read_text(),
                     Loader=_ComposeLoader)["services"]


def test_loopback_override_keeps_every_service_on_loopback():
    """docker-compose.loopback.yml (what `make compose-check` runs): every service on host
    networking, nothing published, every URL and listening address 127.0.0.1."""
    assert set(LOOPBACK) == set(SERVICES)
    for name, service in LOOPBACK.items():
        assert service["network_mode"] == "host", name
        assert not service.get("ports"), name  # `!reset []`: nothing published
        urls = [v for v in (service.get("environment") or {}).values()
                if isinstance(v, str) and "://" in v]
        assert all("@127.0.0.1:" in url for url in urls), (name, urls)
    for name in ("scheduler", "worker-cpu", "dashboard", "migrate"):
        assert "TUNER_DB_URL" in LOOPBACK[name]["environment"], name
    assert "--bind" in LOOPBACK["redis"]["command"]
    assert LOOPBACK["redis"]["command"][LOOPBACK["redis"]["command"].index("--bind") + 1] \
        == "127.0.0.1"
    assert "listen_addresses=127.0.0.1" in LOOPBACK["postgres"]["command"]
    assert LOOPBACK["dashboard"]["command"][1:3] == ["--host", "127.0.0.1"]
    assert LOOPBACK["flower"]["environment"]["FLOWER_ADDRESS"] == "127.0.0.1"
    assert "TUNER_REDIS_HOST_PORT" in (ROOT / ".env.example").read_text()


def test_the_image_takes_its_base_and_keeps_pip_settings_out_of_its_layers():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=python:3.12-slim" in dockerfile
    assert "FROM ${BASE_IMAGE}" in dockerfile
    assert "python3 -m venv /opt/venv" in dockerfile
    assert "--mount=type=secret,id=pip_conf" in dockerfile
    assert "--mount=type=secret,id=pip_ca" in dockerfile
    assert "ARG TORCH_REQUIREMENT=\"\"" in dockerfile  # the default: CUDA torch from PyPI
    for line in dockerfile.splitlines():  # no pip setting copied in or baked into ENV
        if line.startswith(("COPY", "ADD", "ENV")):
            assert "pip.conf" not in line and "PIP_INDEX" not in line and "CERT" not in line
