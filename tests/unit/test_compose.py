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
