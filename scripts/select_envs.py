"""Write asv.selected.conf.json: asv.conf.json with only the environments whose requirements match.

    python scripts/select_envs.py REGEX

REGEX is searched in each `include` entry's requirements written as one line,
"name==version name==version" in the order of asv.conf.json, e.g. 'torch',
'tensorflow-cpu==2.21|jax' or '^keras==' (the Keras environments).  asv itself
cannot pick environments by requirement (`-E` takes an environment type and
Python version only).
"""
import json
import re
import sys

SOURCE, TARGET = "asv.conf.json", "asv.selected.conf.json"


def load_commented_json(path: str) -> dict:
    with open(path) as f:
        text = "\n".join(line for line in f if not line.lstrip().startswith("//"))
    return json.loads(text)


def requirements(entry: dict) -> str:
    return " ".join(f"{name}=={version}" for name, version in entry.get("req", {}).items())


def main(pattern: str) -> int:
    conf = load_commented_json(SOURCE)
    regex = re.compile(pattern)
    conf["include"] = [entry for entry in conf["include"] if regex.search(requirements(entry))]
    if not conf["include"]:
        print(f"no asv environment matches {pattern!r}", file=sys.stderr)
        return 2
    with open(TARGET, "w") as f:
        json.dump(conf, f, indent=4)
    for entry in conf["include"]:
        print("selected:", requirements(entry))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
