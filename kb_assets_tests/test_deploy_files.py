"""Every file of deploy/ is consistent with the code: YAML parses, both instance configs load (with
dagster-k8s installed) against a real Postgres, the image's command, the Helm values and the
workspaces name pyproject's module and code location, and every variable they name is one Settings
reads (KB_*) or is documented where it is used."""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from kb_assets_tests.databases import database_on

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
MODULE = PYPROJECT["tool"]["dagster"]["module_name"]
LOCATION = PYPROJECT["tool"]["dagster"]["code_location_name"]
VERSION = PYPROJECT["project"]["version"]
ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


def load_yaml(relative: str):
    documents = [d for d in yaml.safe_load_all((DEPLOY / relative).read_text()) if d is not None]
    return documents[0] if len(documents) == 1 else documents


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of deploy/Dockerfile, continuation lines joined, heredoc bodies kept."""
    instructions, lines = [], iter((DEPLOY / "Dockerfile").read_text().splitlines())
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        while line.endswith("\\"):
            line = line[:-1] + " " + next(lines).strip()
        keyword, _, rest = line.strip().partition(" ")
        heredoc = re.search(r"<<'?(\w+)'?", rest)
        if heredoc:
            body = []
            for inner in lines:
                if inner.strip() == heredoc.group(1):
                    break
                body.append(inner)
            rest += "\n" + "\n".join(body)
        instructions.append((keyword.upper(), rest))
    return instructions


# -- every file parses --------------------------------------------------------------------------------
def test_every_file_of_deploy_parses():
    files = sorted(p.relative_to(DEPLOY).as_posix() for p in DEPLOY.rglob("*") if p.is_file())
    assert {
        "README.md",
        "Dockerfile",
        "single-host/dagster.yaml",
        "kubernetes/dagster.yaml",
        "kubernetes/workspace.yaml",
        "kubernetes/values-dagster.yaml",
        "kubernetes/values-milvus.yaml",
    } <= set(files)
    for name in files:
        if name.endswith(".yaml"):
            assert list(yaml.safe_load_all((DEPLOY / name).read_text())), f"{name} is empty"
        elif name == "Dockerfile":
            assert dockerfile()[0][0] == "ARG"
        else:
            assert name in ("README.md", "Dockerfile.dockerignore"), f"deploy/{name}: a file this test does not check"


# -- the instance configs load ------------------------------------------------------------------------
@pytest.fixture
def dagster_database(catalog) -> str:
    """A database of its own on the session's Postgres server (over TCP), as a plain postgresql:// URL."""
    return database_on(catalog.dsn, "dagster_deploy_files")


def test_the_single_host_instance_queues_runs_on_postgres(dagster_database, tmp_path, monkeypatch):
    import dagster as dg
    from dagster._core.launcher import DefaultRunLauncher
    from dagster._core.run_coordinator import QueuedRunCoordinator

    shutil.copy(DEPLOY / "single-host" / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", dagster_database)
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
        assert isinstance(instance.run_launcher, DefaultRunLauncher)
        queue = instance.get_concurrency_config().run_queue_config
        assert queue.max_concurrent_runs == 3
        assert queue.tag_concurrency_limits[0]["key"] == "kb/knowledge_base_id"
        instance.add_dynamic_partitions("deploy_files", ["single-host"])
        assert "single-host" in instance.get_dynamic_partitions("deploy_files")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dagster.yaml"]  # runs and events went to Postgres


def test_the_kubernetes_instance_loads_its_k8s_run_launcher(dagster_database, tmp_path, monkeypatch):
    """Loaded as a pod would: the service-account token and CA that Kubernetes mounts, the API server's
    address in KUBERNETES_SERVICE_HOST/PORT, the DAGSTER_PG_* variables the chart provides."""
    import dagster as dg
    import kubernetes.config.incluster_config as incluster
    from dagster._core.run_coordinator import QueuedRunCoordinator
    from dagster_aws.s3.compute_log_manager import S3ComputeLogManager
    from dagster_k8s import K8sRunLauncher

    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("a-service-account-token")
    (account / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    monkeypatch.setattr(incluster, "SERVICE_TOKEN_FILENAME", str(account / "token"))
    monkeypatch.setattr(incluster, "SERVICE_CERT_FILENAME", str(account / "ca.crt"))
    server = urlsplit(dagster_database)
    for name, value in {
        "KUBERNETES_SERVICE_HOST": "10.0.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "DAGSTER_PG_HOST": server.hostname,
        "DAGSTER_PG_PORT": str(server.port),
        "DAGSTER_PG_USER": server.username,
        "DAGSTER_PG_PASSWORD": server.password or "",
        "DAGSTER_PG_DB": server.path.lstrip("/"),
        "AWS_REGION": "eu-west-1",
    }.items():
        monkeypatch.setenv(name, value)
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(DEPLOY / "kubernetes" / "dagster.yaml", home / "dagster.yaml")

    with dg.DagsterInstance.from_config(str(home)) as instance:
        launcher = instance.run_launcher
        assert isinstance(launcher, K8sRunLauncher)
        assert launcher.job_namespace == "kb-assets"
        assert launcher.env_config_maps == ["kb-assets-config"] and launcher.env_secrets == ["kb-assets-env"]
        assert launcher.resources == {"requests": {"cpu": "2", "memory": "3Gi"}, "limits": {"memory": "4Gi"}}
        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
        assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 20
        assert isinstance(instance.compute_log_manager, S3ComputeLogManager)
        instance.add_dynamic_partitions("deploy_files", ["kubernetes"])
        assert "kubernetes" in instance.get_dynamic_partitions("deploy_files")


# -- image, workspaces and Helm values agree with pyproject and each other ----------------------------
def test_the_image_serves_the_code_location_of_pyproject():
    steps = dockerfile()
    (cmd,) = [json.loads(args) for keyword, args in steps if keyword == "CMD"]
    assert cmd[:3] == ["dagster", "api", "grpc"]
    assert cmd[cmd.index("-m") + 1] == MODULE and cmd[cmd.index("--location-name") + 1] == LOCATION
    assert not any(keyword == "ENTRYPOINT" for keyword, _ in steps)  # Kubernetes args replace CMD only
    runs = [args for keyword, args in steps if keyword == "RUN"]
    assert any("pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in r for r in runs)
    install = next(r for r in runs if "kb_assets-*.whl" in r)
    assert "-e " not in install and "[k8s]" in install and "-c /tmp/constraints.txt" in install
    assert PYPROJECT["project"]["optional-dependencies"]["k8s"] == ["dagster-k8s==0.29.27"]
    assert any('load_model("all-MiniLM-L6-v2")' in r and "ocr_lines" in r for r in runs)  # caches baked in


def test_workspaces_and_helm_values_name_the_same_code_location_and_settings():
    values = load_yaml("kubernetes/values-dagster.yaml")
    instance = load_yaml("kubernetes/dagster.yaml")
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    (server,) = values["dagsterWebserver"]["workspace"]["servers"]
    (grpc,) = [entry["grpc_server"] for entry in load_yaml("kubernetes/workspace.yaml")["load_from"]]
    (local,) = [entry["python_module"] for entry in load_yaml("single-host/workspace.yaml")["load_from"]]
    (root,) = [entry["python_module"] for entry in yaml.safe_load((REPO / "workspace.yaml").read_text())["load_from"]]

    assert server == {"host": deployment["name"], "port": deployment["port"], "name": LOCATION}
    assert grpc == {"host": deployment["name"], "port": deployment["port"], "location_name": LOCATION}
    assert local == {"module_name": MODULE, "location_name": LOCATION}
    assert (root["module_name"], root["location_name"]) == (MODULE, LOCATION)  # make dev names it alike
    args = deployment["dagsterApiGrpcArgs"]
    assert args[args.index("-m") + 1] == MODULE and args[args.index("--location-name") + 1] == LOCATION
    assert deployment["image"]["tag"] == VERSION

    # the run pods get what the chart renders from the values, and what deploy/kubernetes/dagster.yaml says
    launcher, k8s = values["runLauncher"]["config"]["k8sRunLauncher"], instance["run_launcher"]["config"]
    assert values["runLauncher"]["type"] == "K8sRunLauncher" and instance["run_launcher"]["class"] == "K8sRunLauncher"
    assert (
        [s["name"] for s in launcher["envSecrets"]]
        == k8s["env_secrets"]
        == [s["name"] for s in deployment["envSecrets"]]
    )
    assert (
        [c["name"] for c in launcher["envConfigMaps"]]
        == k8s["env_config_maps"]
        == [c["name"] for c in deployment["envConfigMaps"]]
    )
    assert launcher["resources"] == k8s["resources"] and "resources" not in deployment
    assert (
        launcher["runK8sConfig"]["jobSpecConfig"]["ttlSecondsAfterFinished"]
        == k8s["run_k8s_config"]["job_spec_config"]["ttl_seconds_after_finished"]
    )
    queued = values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    coordinator = instance["run_coordinator"]["config"]
    assert queued["maxConcurrentRuns"] == coordinator["max_concurrent_runs"]
    assert queued["tagConcurrencyLimits"] == coordinator["tag_concurrency_limits"]
    assert values["postgresql"]["postgresqlScheme"] == instance["storage"]["postgres"]["postgres_db"]["scheme"]
    assert values["global"]["postgresqlSecretName"] == k8s["postgres_password_secret"]
    assert values["global"]["dagsterHome"] == k8s["dagster_home"]
    assert (
        values["computeLogManager"]["config"]["s3ComputeLogManager"]["bucket"]
        == instance["compute_logs"]["config"]["bucket"]
    )

    config_map, secret, _ = load_yaml("kubernetes/config.example.yaml")
    # a UI backfill is cut into runs (run pods) of as many documents as ingest and the sensor put in one
    from kb_assets.defs.assets import ASSETS

    assert {a.backfill_policy.max_partitions_per_run for a in ASSETS} == {int(config_map["data"]["KB_RUN_BATCH_SIZE"])}
    assert {config_map["metadata"]["name"]} == set(k8s["env_config_maps"])
    assert {secret["metadata"]["name"]} == set(k8s["env_secrets"])
    service = next(d for d in load_yaml("kubernetes/retrieval-service.yaml") if d["kind"] == "Deployment")
    (container,) = service["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{deployment['image']['repository']}:{VERSION}"
    assert container["command"][0] in PYPROJECT["project"]["scripts"]


def test_milvus_values_deploy_a_cluster_that_has_what_the_collection_schema_uses():
    from kb_assets.stores.vectors import BM25_ANALYZER

    values = load_yaml("kubernetes/values-milvus.yaml")
    major, minor, _ = (int(part) for part in values["image"]["all"]["tag"].lstrip("v").split("."))
    assert (major, minor) >= (2, 5)  # BM25 function, jieba analyzer, SPARSE_INVERTED_INDEX/BM25
    assert BM25_ANALYZER["tokenizer"] == "jieba"
    assert values["cluster"]["enabled"] is True and values["minio"]["enabled"] is False
    assert values["externalS3"]["enabled"] is True
    overrides = yaml.safe_load(values["extraConfigFiles"]["user.yaml"])
    assert overrides["queryNode"]["mmap"]["vectorField"] is True
    config_map = load_yaml("kubernetes/config.example.yaml")[0]
    assert urlsplit(config_map["data"]["KB_MILVUS_URI"]).port == 19530  # the chart's proxy Service port


# -- every variable is read by Settings or documented where it is used --------------------------------
def variables_used(relative: str) -> set[str]:
    """Environment variable names a deploy file sets or reads."""
    names: set[str] = set()
    if relative == "Dockerfile":
        for keyword, args in dockerfile():
            if keyword in ("ENV", "ARG"):
                names |= {part.split("=", 1)[0] for part in args.split() if "=" in part or keyword == "ARG"}
        return {n for n in names if ENV_NAME.match(n)}

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "env" and isinstance(value, str):
                    names.add(value)  # a Dagster config value {env: NAME}
                elif key == "env" and isinstance(value, list):  # a container's env list
                    names.update(item["name"] for item in value if isinstance(item, dict) and "name" in item)
                elif key in ("env", "data", "stringData") and isinstance(value, dict):
                    names.update(value)  # a chart's env map; ConfigMap/Secret keys
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for document in yaml.safe_load_all((DEPLOY / relative).read_text()):
        walk(document)
    return {n for n in names if ENV_NAME.match(n)}


def names_settings_reads() -> set[str]:
    from kb_assets.settings import Settings

    class Recording(dict):
        def __init__(self):
            super().__init__()
            self.names: set[str] = set()

        def get(self, key, default=None):
            self.names.add(key)
            return super().get(key, default)

        def __getitem__(self, key):
            self.names.add(key)
            return super().__getitem__(key)

    env = Recording()
    Settings.from_env(env)
    return env.names


def test_every_variable_in_deploy_is_read_by_settings_or_documented_where_it_is_used():
    read = names_settings_reads()
    assert {"KB_POSTGRES_URL", "KB_WATCH", "AWS_ENDPOINT_URL"} <= read
    files = [p.relative_to(DEPLOY).as_posix() for p in DEPLOY.rglob("*") if p.suffix == ".yaml"] + ["Dockerfile"]
    seen = set()
    for name in files:
        text = (DEPLOY / name).read_text()
        comments = "\n".join(line.split("#", 1)[1] for line in text.splitlines() if "#" in line)
        for variable in variables_used(name):
            seen.add(variable)
            if variable.startswith("KB_"):
                assert variable in read, f"deploy/{name}: {variable} is not a setting of kb_assets/settings/"
            else:
                assert re.search(rf"\b{variable}\b", comments), f"deploy/{name}: {variable} is not documented there"
    assert {
        "KB_MILVUS_URI",
        "KB_POSTGRES_URL",
        "DAGSTER_POSTGRES_URL",
        "DAGSTER_PG_PASSWORD",
        "HF_HUB_OFFLINE",
        "AWS_SECRET_ACCESS_KEY",
    } <= seen  # the extraction finds what the files name
    readme = (DEPLOY / "README.md").read_text()
    unknown = sorted(set(re.findall(r"\bKB_[A-Z0-9_]+\b", readme)) - read)
    assert not unknown, f"deploy/README.md names settings that do not exist: {unknown}"
