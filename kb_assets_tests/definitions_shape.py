"""What the Dagster UI shows of the definitions, as plain data: every asset's description, group, kinds,
code version, partitions, dependencies, backfill policy and op tags; every check; jobs, sensors,
schedules and resources. ``test_definitions_shape.py`` holds it against ``definitions_shape.json``."""

from __future__ import annotations

import dagster as dg


def definitions_shape(defs: dg.Definitions) -> dict:
    repo = defs.get_repository_def()
    graph = repo.asset_graph
    shape: dict = {"assets": {}, "checks": {}, "jobs": {}, "sensors": {}, "schedules": {}}
    for key in sorted(graph.materializable_asset_keys, key=lambda k: k.to_user_string()):
        node = graph.get(key)
        assets_def = repo.assets_defs_by_key[key]
        shape["assets"][key.to_user_string()] = {
            "description": node.description,
            "group": node.group_name,
            "kinds": sorted(node.kinds),
            "code_version": node.code_version,
            "partitions": getattr(node.partitions_def, "name", None),
            "deps": sorted(k.to_user_string() for k in node.parent_keys),
            "backfill_policy": str(node.backfill_policy),
            "tags": dict(node.tags),
            "op_tags": dict(assets_def.op.tags or {}),
        }
    for assets_def in {id(a): a for a in repo.assets_defs_by_key.values()}.values():
        for spec in assets_def.check_specs:
            shape["checks"][f"{spec.asset_key.to_user_string()}:{spec.name}"] = {
                "description": spec.description,
                "blocking": spec.blocking,
            }
    for job in repo.get_all_jobs():
        if not job.name.startswith("__"):
            shape["jobs"][job.name] = {"description": job.description, "tags": dict(job.tags)}
    for sensor in repo.sensor_defs:
        shape["sensors"][sensor.name] = {
            "interval": sensor.minimum_interval_seconds,
            "status": str(sensor.default_status),
            "jobs": sorted(target.job_name for target in sensor.targets),
        }
    for schedule in repo.schedule_defs:
        shape["schedules"][schedule.name] = {
            "cron": schedule.cron_schedule,
            "job": schedule.job_name,
            "status": str(schedule.default_status),
        }
    shape["resources"] = sorted(defs.resources or {})
    return shape


if __name__ == "__main__":
    import json
    import tempfile

    from kb_assets.definitions import make_definitions
    from kb_assets.settings import Settings

    settings = Settings.from_env({"KB_HOME": tempfile.mkdtemp()})
    print(json.dumps(definitions_shape(make_definitions(settings)), indent=1, sort_keys=True))
