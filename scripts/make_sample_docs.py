"""Writes the sample knowledge base's PDF and Word documents (and their metadata sidecars).

    python scripts/make_sample_docs.py          # (re)write them into src/grounded_agent/sample/kb/
    python scripts/make_sample_docs.py --check  # exit 1 if the committed files differ

The files are committed, so `make demo` needs nothing of this; the output is byte-for-byte
reproducible (tests/unit/test_sample_docs.py checks the committed files against it). It uses
pypdf and python-docx, both runtime dependencies, through tests/support/documents.py.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "grounded_agent" / "sample" / "kb"

GUIDE_PAGES = [
    [
        ("title", "Lumenary Beacon administrator guide"),
        (
            "p",
            "This guide is for the owners and administrators of a Lumenary Beacon workspace. It "
            "covers roles, single sign-on, sessions, network restrictions and data export, and "
            "applies to Beacon release 2026.3 and later.",
        ),
        ("h1", "Roles and permissions"),
        (
            "p",
            "Every member of a workspace has one of four roles. Owners manage billing, single "
            "sign-on and data export. Admins manage members, workspaces and integrations. Editors "
            "create and change dashboards and reports. Viewers can open dashboards and reports "
            "but cannot change them.",
        ),
        (
            "p",
            "A workspace always has at least one owner. Only an owner can transfer ownership to "
            "another member, from Settings > Members.",
        ),
    ],
    [
        ("h1", "Single sign-on"),
        (
            "p",
            "Single sign-on is available on the Pro and Enterprise plans. Beacon supports SAML 2.0 "
            "and OpenID Connect with any standards-compliant identity provider, including Okta, "
            "Microsoft Entra ID and Google Workspace.",
        ),
        (
            "p",
            "To set it up, an owner opens Settings > Security > Single sign-on, uploads the "
            "metadata file of the identity provider and verifies the company email domain with a "
            "DNS TXT record. Once single sign-on is enforced, members can no longer sign in with "
            "a password.",
        ),
        ("h2", "User provisioning"),
        (
            "p",
            "Enterprise workspaces can create and remove members automatically with SCIM 2.0. A "
            "member removed in the identity provider loses access to Beacon within five minutes.",
        ),
        ("h1", "Sessions"),
        (
            "p",
            "A signed-in session ends after 12 hours without activity. Owners can shorten this "
            "idle timeout to any value between 15 minutes and 12 hours under Settings > Security "
            "> Sessions.",
        ),
    ],
    [
        ("h1", "IP allow-listing"),
        (
            "p",
            "Enterprise workspaces can restrict access to trusted networks. An owner can "
            "allow-list up to 50 IP address ranges in CIDR notation under Settings > Security > "
            "Network. Requests from any other address are refused, API requests included.",
        ),
        ("h1", "Data export"),
        (
            "p",
            "Owners can export all dashboards, reports and raw data of a workspace as CSV or "
            "Parquet files from Settings > Data > Export. The export is prepared in the "
            "background, and an email with a download link is sent when it is ready. Download "
            "links stay valid for seven days.",
        ),
    ],
]

GUIDE_SIDECAR = """\
# Metadata of admin_guide.pdf beyond what the PDF holds (its title and date come from the file)
id: lumenary-admin-guide
version: "2026.3"
source_url: https://lumenary.example/docs/admin-guide.pdf
"""

SERVICES_BLOCKS = [
    ("title", "Lumenary onboarding and training services"),
    (
        "p",
        "Lumenary offers fixed-price services that help new customers set up Beacon. Prices are "
        "in euros, exclude VAT, and are invoiced when the work starts.",
    ),
    ("h1", "Onboarding packages"),
    ("h2", "Quick start"),
    (
        "p",
        "The Quick start package costs 1,500 euros. It includes two remote sessions of two hours "
        "with a Lumenary consultant: one to connect the first data sources and one to build the "
        "first three dashboards. Quick start can be booked on every plan.",
    ),
    ("h2", "Guided rollout"),
    (
        "p",
        "The Guided rollout package costs 6,000 euros and runs for six weeks. A named consultant "
        "plans the rollout with the customer, configures single sign-on and user provisioning, "
        "moves up to 20 existing reports into Beacon and trains the first administrators. Guided "
        "rollout can be booked on the Pro and Enterprise plans.",
    ),
    (
        "table",
        [
            ["Package", "Price", "Duration", "Plans"],
            ["Quick start", "1,500 euros", "two sessions", "all plans"],
            ["Guided rollout", "6,000 euros", "six weeks", "Pro and Enterprise"],
        ],
    ),
    ("h1", "Training"),
    (
        "p",
        "Live online training for up to 15 participants costs 450 euros per three-hour session. "
        "Sessions are held in English, Dutch or German.",
    ),
    (
        "p",
        "The Beacon Certified Administrator exam costs 150 euros per attempt. The certificate is "
        "valid for two years.",
    ),
]

SERVICES_SIDECAR = """\
# Metadata of onboarding_services.docx beyond its core properties (title, date, language)
id: lumenary-onboarding-services
"""


def build() -> dict[str, bytes]:
    """File name -> content, for every generated file of the sample knowledge base."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.support.documents import docx_bytes, pdf_bytes

    guide = pdf_bytes(
        GUIDE_PAGES,
        info={
            "/Title": "Lumenary Beacon administrator guide",
            "/Author": "Lumenary documentation team",
            "/CreationDate": "D:20260928090000Z",
            "/ModDate": "D:20261005090000Z",
        },
        lang="en-GB",
        footer="Lumenary Beacon administrator guide - release 2026.3 - page {page} of {pages}",
    )
    services = docx_bytes(
        SERVICES_BLOCKS,
        core={
            "title": "Lumenary onboarding and training services",
            "version": "2026.1",
            "language": "en-GB",
            "author": "Lumenary services team",
            "created": datetime(2026, 8, 3, 9, 0),
            "modified": datetime(2026, 8, 20, 16, 30),
        },
    )
    return {
        "admin_guide.pdf": guide,
        "admin_guide.pdf.meta.yaml": GUIDE_SIDECAR.encode(),
        "onboarding_services.docx": services,
        "onboarding_services.docx.meta.yaml": SERVICES_SIDECAR.encode(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    stale = []
    for name, data in build().items():
        path = args.out / name
        if args.check:
            if not path.is_file() or path.read_bytes() != data:
                stale.append(name)
        else:
            path.write_bytes(data)
            print(f"wrote {path} ({len(data):,} bytes)")
    if stale:
        print(f"differ from the generator: {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
