"""A package registry on localhost for the ledger's tests: tiny real wheels, served with the
JSON simple index (PEP 691, upload times of PEP 700) that pip and fwkernels' discovery read."""
from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import threading
import zipfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence


@dataclass
class Package:
    name: str
    version: str
    uploaded: str  # ISO date of the upload
    requires: Sequence[str] = ()
    requires_python: Optional[str] = None


def make_wheel(directory: str, package: Package) -> str:
    """A pure-Python wheel whose module says its version: ``<module>.VERSION``."""
    module = package.name.replace("-", "_")
    dist_info = f"{module}-{package.version}.dist-info"
    metadata = [f"Metadata-Version: 2.1", f"Name: {package.name}", f"Version: {package.version}"]
    metadata += [f"Requires-Dist: {r}" for r in package.requires]
    if package.requires_python:
        metadata.append(f"Requires-Python: {package.requires_python}")
    files = {
        f"{module}/__init__.py": f'VERSION = "{package.version}"\n',
        f"{dist_info}/METADATA": "\n".join(metadata) + "\n",
        f"{dist_info}/WHEEL": ("Wheel-Version: 1.0\nGenerator: fwkernels-tests\n"
                               "Root-Is-Purelib: true\nTag: py3-none-any\n"),
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = "\n".join(record) + "\n"
    path = os.path.join(directory, f"{module}-{package.version}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return path


@dataclass
class FakeRegistry:
    directory: str
    packages: List[Package] = field(default_factory=list)
    url: str = ""

    def add(self, package: Package) -> None:
        make_wheel(self.directory, package)
        self.packages.append(package)

    def index(self, name: str) -> Optional[dict]:
        found = [p for p in self.packages if p.name == name]
        if not found:
            return None
        files = []
        for p in found:
            filename = f"{p.name.replace('-', '_')}-{p.version}-py3-none-any.whl"
            with open(os.path.join(self.directory, filename), "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            files.append({"filename": filename, "url": f"{self.url}/files/{filename}",
                          "hashes": {"sha256": digest}, "upload-time": f"{p.uploaded}T10:00:00Z",
                          "requires-python": p.requires_python})
        return {"meta": {"api-version": "1.1"}, "name": name, "files": files,
                "versions": sorted({p.version for p in found})}

    def __enter__(self) -> "FakeRegistry":
        registry = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = [p for p in self.path.split("/") if p]
                if len(parts) == 2 and parts[0] == "simple":
                    body = registry.index(parts[1])
                    if body is None:
                        return self.send_error(404)
                    data = json.dumps(body).encode()
                    content_type = "application/vnd.pypi.simple.v1+json"
                elif len(parts) == 2 and parts[0] == "files":
                    path = os.path.join(registry.directory, os.path.basename(parts[1]))
                    if not os.path.exists(path):
                        return self.send_error(404)
                    with open(path, "rb") as f:
                        data = f.read()
                    content_type = "application/octet-stream"
                else:
                    return self.send_error(404)
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def simple(self) -> str:
        return f"{self.url}/simple/"


def pip_environment(registry: FakeRegistry) -> Dict[str, str]:
    """pip sees this registry only: no configuration file, no other index, no cache."""
    return {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": registry.simple,
            "PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "", "PIP_NO_CACHE_DIR": "1"}
