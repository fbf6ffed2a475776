"""The sample knowledge base's PDF and Word file are what the committed generator writes."""

from __future__ import annotations

from types import ModuleType

from grounded_agent.loaders import load_file
from grounded_agent.sample import SAMPLE_KB
from grounded_agent.store.ingest import chunk_document
from tests.support.benchmarks import ROOT, load_script


def _generator() -> ModuleType:
    return load_script(ROOT / "scripts" / "make_sample_docs.py")


def test_committed_files_are_the_generators_output() -> None:
    built = _generator().build()
    assert set(built) == {
        "admin_guide.pdf",
        "admin_guide.pdf.meta.yaml",
        "onboarding_services.docx",
        "onboarding_services.docx.meta.yaml",
    }
    stale = [name for name, data in built.items() if (SAMPLE_KB / name).read_bytes() != data]
    assert stale == [], "run: python scripts/make_sample_docs.py"


def test_the_sample_pdf_reads_back_with_its_pages_and_metadata() -> None:
    [doc], errors = load_file(SAMPLE_KB / "admin_guide.pdf")
    assert errors == []
    assert (doc.doc_id, doc.version, str(doc.document_date)) == ("lumenary-admin-guide", "2026.3", "2026-10-05")
    pages = {c.section: c.page for c in chunk_document(doc)}
    prefix = "Lumenary Beacon administrator guide > "
    assert pages[prefix + "Roles and permissions"] == 1
    assert pages[prefix + "Single sign-on > User provisioning"] == 2
    assert pages[prefix + "IP allow-listing"] == 3
    assert "page 3 of 3" not in doc.text  # the running footer is not indexed


def test_the_sample_word_file_reads_back_with_its_sections() -> None:
    [doc], _ = load_file(SAMPLE_KB / "onboarding_services.docx")
    assert (doc.doc_id, doc.version, str(doc.document_date)) == ("lumenary-onboarding-services", "2026.1", "2026-08-20")
    sections = {c.section: c.content for c in chunk_document(doc)}
    rollout = sections["Lumenary onboarding and training services > Onboarding packages > Guided rollout"]
    assert "costs 6,000 euros" in rollout
    assert "Package: Guided rollout; Price: 6,000 euros; Duration: six weeks" in rollout
