#!/usr/bin/env python3
"""The SPDX 2.3 software bill of materials of a cdcwatch image: every Debian package (dpkg's database) and every
Python distribution of its virtualenv (pip's `inspect` report), each with its version, its licence where the
package declares one, and its package URL. Read from the image itself with podman, so the SBOM says what was
shipped, not what was asked for.

    scripts/sbom.py IMAGE > sbom.spdx.json
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from email.message import Message
from email.parser import Parser
from pathlib import Path
from typing import Any

VENV = "opt/cdcwatch"
"""Where image/Containerfile installs cdcwatch."""
_SPDX_ID = re.compile(r"[^A-Za-z0-9.-]+")


def _debian(root: Path) -> list[tuple[str, str, str]]:
    """(name, version, architecture) of each package dpkg's database says is installed."""
    found = []
    for stanza in (root / "var/lib/dpkg/status").read_text(encoding="utf-8").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line.startswith(" "))
        if fields.get("Status", "").endswith(" installed"):
            found.append((fields["Package"], fields["Version"], fields["Architecture"]))
    return found


def _python(root: Path) -> list[Message]:
    """The core metadata of each distribution installed in cdcwatch's virtualenv."""
    return [Parser().parsestr(metadata.read_text(encoding="utf-8"), headersonly=True)
            for metadata in sorted((root / VENV).glob("lib/python3*/site-packages/*.dist-info/METADATA"))]


def _package(kind: str, name: str, version: str, purl: str, licence: str | None) -> dict[str, Any]:
    return {"SPDXID": f"SPDXRef-{kind}-{_SPDX_ID.sub('-', name)}-{_SPDX_ID.sub('-', version)}", "name": name,
            "versionInfo": version, "downloadLocation": "NOASSERTION", "filesAnalyzed": False,
            "licenseConcluded": "NOASSERTION", "licenseDeclared": licence or "NOASSERTION", "copyrightText": "NOASSERTION",
            "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": purl}]}


def sbom(image: str, root: Path) -> dict[str, Any]:
    """The SPDX document of `image`, its root filesystem at `root`."""
    packages = [_package("deb", name, version, f"pkg:deb/debian/{name}@{version}?arch={arch}", None)
                for name, version, arch in _debian(root)]
    # a distribution's licence only where it gives an SPDX expression (core metadata 2.4's License-Expression): the
    # free-text License field is not one
    packages += [_package("pypi", m["Name"], m["Version"], f"pkg:pypi/{m['Name'].lower()}@{m['Version']}",
                          m.get("License-Expression")) for m in _python(root)]
    created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"spdxVersion": "SPDX-2.3", "dataLicense": "CC0-1.0", "SPDXID": "SPDXRef-DOCUMENT", "name": image,
            "documentNamespace": f"https://spdx.org/spdxdocs/cdcwatch-{uuid.uuid4()}",
            "creationInfo": {"created": created, "creators": ["Tool: cdcwatch-scripts-sbom.py"]},
            "packages": packages,
            "relationships": [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
                               "relatedSpdxElement": p["SPDXID"]} for p in packages]}


def main(image: str) -> None:
    mounted = subprocess.run(["podman", "image", "mount", image], capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        sys.exit(f"sbom: cannot mount {image} (podman image mount needs root): {mounted.stderr.strip()}")
    try:
        document = sbom(image, Path(mounted.stdout.strip()))
    finally:
        subprocess.run(["podman", "image", "unmount", image], capture_output=True, check=False)
    json.dump(document, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
