"""Redaction throughput (1 KB and 20 KB documents) and per-entity precision/recall/F2.

Both measured for the default Presidio configuration (the baseline: full en_core_web_sm
pipeline, Presidio's PhoneRecognizer and context enhancer, no windows) and for the tuned
Redactor the service runs, in the same run on the same documents. The reference is the
embedding stage on the same redacted documents (chunked to 254 tokens, all-MiniLM-L6-v2),
the stage redaction must keep up with. docs/s is given per wall second and per CPU second
of this process (the machine is shared; CPU time is the steadier figure).
Prints tables and writes bench-results/redaction.json.

`--locales`: PERSON recall per Faker locale on chat transcripts, e-mails and tickets
(scripts/benchlib/pii_generated.conversations) of the held-out seed (`--tune`: the tuning
seeds), with PERSON precision on technical prose when `--beir` is given; writes
bench-results/redaction-locales.json, and `--before FILE` (an earlier such file, e.g. from
the code before a change) adds its figures beside the new ones.

`--forms`: instead, PII planted in every form a reader still recognises (digits as words,
other digit scripts, separator runs, spelled "@", look-alike letters, URLs, JSON, CSV, chat
labels ...) per form, type and locale, ordinary business tokens left alone, and docs/s,
each beside a baseline commit's redactor (scripts/benchlib/pii_bench.py).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from presidio_analyzer import AnalyzerEngine, BatchAnalyzerEngine, RecognizerResult
from presidio_analyzer.nlp_engine import SpacyNlpEngine
from presidio_analyzer.predefined_recognizers import PhoneRecognizer
from presidio_anonymizer import AnonymizerEngine
from presidio_anonymizer.entities import OperatorConfig

from scripts.benchlib.paths import RESULTS
from scripts.benchlib.pii_corpus import Labelled, Span, labelled_texts
from scripts.benchlib.pii_generated import (
    HELDOUT_SEED,
    SLICES,
    TUNE_LOCALES,
    TUNE_SEEDS,
    conversations,
    generate,
)
from services.redaction.nlp import spacy_model_path
from services.redaction.recognizers import secret_recognizer
from services.redaction.redactor import Redactor
from services.redaction.settings import RedactionSettings

Analyze = Callable[[list[str]], list[list[RecognizerResult]]]


class PresidioDefault:
    """What the service ran before tuning: Presidio's defaults around en_core_web_sm."""

    def __init__(self, settings: RedactionSettings) -> None:
        model = spacy_model_path("en_core_web_sm")
        nlp = SpacyNlpEngine(models=[{"lang_code": "en", "model_name": model}])
        analyzer = AnalyzerEngine(nlp_engine=nlp, supported_languages=["en"])
        analyzer.registry.remove_recognizer("PhoneRecognizer")
        analyzer.registry.add_recognizer(
            PhoneRecognizer(supported_regions=list(settings.phone_regions)))
        analyzer.registry.add_recognizer(secret_recognizer())
        self.batch, self.settings = BatchAnalyzerEngine(analyzer_engine=analyzer), settings
        self.anonymizer = AnonymizerEngine()

    def analyze(self, texts: list[str]) -> list[list[RecognizerResult]]:
        return self.batch.analyze_iterator(
            texts, language="en", batch_size=16, entities=list(self.settings.entities),
            score_threshold=self.settings.score_threshold)

    def redact(self, texts: list[str]) -> list[str]:
        out = []
        for text, found in zip(texts, self.analyze(texts), strict=True):
            ops = {e: OperatorConfig("replace", {"new_value": f"<{e}>"})
                   for e in {r.entity_type for r in found}}
            # presidio_anonymizer declares its own RecognizerResult: the analyzer's has its fields
            out.append(self.anonymizer.anonymize(text, found, ops).text)  # type: ignore[arg-type]
        return out


def throughput(name: str, redact: Callable[[list[str]], object], texts: list[str],
               batch: int) -> dict[str, float]:
    wall = cpu = 0.0
    for i in range(0, len(texts), batch):
        w, c = time.perf_counter(), time.process_time()
        redact(texts[i:i + batch])
        wall += time.perf_counter() - w
        cpu += time.process_time() - c
        print(f"  {name}: {min(i + batch, len(texts))}/{len(texts)} docs", flush=True)
    return {"docs": len(texts), "wall_docs_s": len(texts) / wall, "cpu_docs_s": len(texts) / cpu}


def embedding_reference(texts: list[str], batch: int) -> dict[str, float]:
    from services.chunking.documents import DocumentChunker
    from shared.contract.records import RedactedDocument
    from shared.encoder.embedder import Encoder
    enc = Encoder()
    chunker = DocumentChunker(enc.tokenizer, 254)
    docs = [RedactedDocument(doc_id=f"b{i}", version=1, text=t, source="bench", event_time=0,
                             ingest_time=0) for i, t in enumerate(texts)]
    chunks = [[c.text for c in chunker.chunk(d).chunks] for d in docs]

    def embed(group: list[list[str]]) -> None:
        enc.encode([c for cs in group for c in cs])
    wall = cpu = 0.0
    for i in range(0, len(chunks), batch):
        w, c = time.perf_counter(), time.process_time()
        embed(chunks[i:i + batch])
        wall += time.perf_counter() - w
        cpu += time.process_time() - c
    n = len(texts)
    return {"docs": n, "wall_docs_s": n / wall, "cpu_docs_s": n / cpu,
            "chunks_per_doc": sum(map(len, chunks)) / n}


def token_labels(text: str, spans: list[tuple[str, int, int, float]]) -> list[str]:
    """presidio-evaluator style: each whitespace token takes the best-scoring span over it."""
    labels = []
    for m in re.finditer(r"\S+", text):
        over = [s for s in spans if s[1] < m.end() and m.start() < s[2]]
        labels.append(max(over, key=lambda s: s[3])[0] if over else "O")
    return labels


def quality(analyze: Analyze, corpus: list[Labelled]) -> dict[str, dict[str, float]]:
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    whole: Counter[str] = Counter()
    total: Counter[str] = Counter()
    found = analyze([c.text for c in corpus])
    for item, results in zip(corpus, found, strict=True):
        gold = token_labels(item.text, [(s.entity, s.start, s.end, 1.0) for s in item.spans])
        pred = token_labels(item.text, [(r.entity_type, r.start, r.end, r.score)
                                        for r in results])
        for g, p in zip(gold, pred, strict=True):
            tp[g] += g == p != "O"
            fp[p] += p not in ("O", g)
            fn[g] += g not in ("O", p)
        for s in item.spans:  # a value is safe only when masked whole, whatever the type
            total[s.entity] += 1
            cover = {i for r in results for i in range(r.start, r.end)}
            whole[s.entity] += all(i in cover for i in range(s.start, s.end))
    out: dict[str, dict[str, float]] = {}
    for e in sorted(total):
        prec = tp[e] / (tp[e] + fp[e]) if tp[e] + fp[e] else 0.0
        rec = tp[e] / (tp[e] + fn[e]) if tp[e] + fn[e] else 0.0
        f2 = 5 * prec * rec / (4 * prec + rec) if prec + rec else 0.0
        out[e] = {"precision": prec, "recall": rec, "f2": f2, "masked": whole[e] / total[e],
                  "values": total[e]}
    return out


def read_beir(path: Path, limit: int | None) -> tuple[dict, dict, dict]:
    """corpus {id: (title, text)}, queries {id: text}, qrels {qid: {doc: rel}} (test, else
    train split); with `limit`, the corpus is cut to the judged documents plus others up
    to `limit`, and only queries with a judged document inside are kept."""
    split = next(p for p in ("test", "dev", "train") if (path / "qrels" / f"{p}.tsv").exists())
    qrels: dict[str, dict[str, int]] = {}
    for line in (path / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]:
        qid, did, rel = line.split("\t")[:3]
        qrels.setdefault(qid, {})[did] = int(rel)
    corpus = {}
    judged = {d for rels in qrels.values() for d in rels}
    for line in (path / "corpus.jsonl").open():
        row = json.loads(line)
        corpus[row["_id"]] = (row.get("title", ""), row["text"])
    if limit is not None and limit < len(corpus):
        keep = [d for d in corpus if d in judged][:limit]
        keep += [d for d in corpus if d not in judged][:max(0, limit - len(keep))]
        corpus = {d: corpus[d] for d in keep}
    queries = {}
    for line in (path / "queries.jsonl").open():
        row = json.loads(line)
        if row["_id"] in qrels and any(d in corpus for d in qrels[row["_id"]]):
            queries[row["_id"]] = row["text"]
    return corpus, queries, qrels


def ndcg_at_10(ranked: list[str], rels: dict[str, int]) -> float:
    """BEIR / pytrec_eval nDCG@10: gain = relevance, discount log2(rank + 1)."""
    import math
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(rels.values(), reverse=True)[:10]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def retrieval_utility(path: Path, redactor: Redactor, limit: int | None,
                      batch: int) -> dict[str, float]:
    """nDCG@10 of a BEIR collection indexed with redaction off and on.

    Both runs go through the service's chunker (254 tokens), the encoder and an exact
    FAISS inner-product index, documents ranked by their best chunk, as the mesh does.
    Chunks that redaction left unchanged are encoded once and shared by both runs.
    """
    import faiss
    import numpy as np
    from tqdm import tqdm

    from services.chunking.documents import DocumentChunker
    from shared.contract.records import RedactedDocument
    from shared.encoder.embedder import Encoder

    corpus, queries, qrels = read_beir(path, limit)
    ids = list(corpus)
    enc = Encoder()
    chunker = DocumentChunker(enc.tokenizer, 254)
    redacted: dict[str, tuple[str, str]] = {}
    changed = 0
    found: Counter[str] = Counter()
    for i in tqdm(range(0, len(ids), batch), desc="redacting corpus", unit="batch"):
        group = ids[i:i + batch]
        texts = [t for d in group for t in corpus[d]]
        done = redactor.redact_texts(texts)
        for k, d in enumerate(group):
            redacted[d] = (done[2 * k].text, done[2 * k + 1].text)
            changed += redacted[d] != corpus[d]
            found += done[2 * k].counts + done[2 * k + 1].counts
    cache: dict[str, np.ndarray] = {}

    def index(docs: dict[str, tuple[str, str]]) -> tuple[faiss.Index, list[str]]:
        owners, texts = [], []
        for d, (title, text) in docs.items():
            doc = RedactedDocument(doc_id=d, version=1, title=title, text=text,
                                   source="beir", event_time=0, ingest_time=0)
            for c in chunker.chunk(doc).chunks:
                owners.append(d)
                texts.append(c.text)
        todo = sorted({t for t in texts if t not in cache})
        for i in tqdm(range(0, len(todo), 64), desc="encoding chunks", unit="batch"):
            for t, v in zip(todo[i:i + 64], enc.encode(todo[i:i + 64]), strict=True):
                cache[t] = v
        ix = faiss.IndexFlatIP(enc.dim)
        ix.add(np.stack([cache[t] for t in texts]).astype("float32"))
        return ix, owners

    qids = list(queries)
    qvec = np.asarray(enc.encode([queries[q] for q in qids]), dtype="float32")
    out: dict[str, float] = {"documents": len(ids), "queries": len(qids),
                             "documents_changed": changed,
                             **{f"found_{e}": n for e, n in sorted(found.items())}}
    for name, docs in (("off", corpus), ("on", redacted)):
        ix, owners = index(docs)
        _, hits = ix.search(qvec, 100)
        scores = []
        for q, row in zip(qids, hits, strict=True):
            ranked: list[str] = []
            for h in row:
                if h >= 0 and owners[h] not in ranked:
                    ranked.append(owners[h])
            scores.append(ndcg_at_10(ranked, qrels[q]))
        out[f"ndcg10_{name}"] = float(np.mean(scores))
    return out


# People written into technical prose the way papers and reports name them; the forms are
# not the ones the name rules were written against (see tests/unit/redaction).
PROSE_FORMS = ("We thank {} for technical assistance.", "Correspondence: {}.",
               "Samples were prepared by {} at the core facility.",
               "{} performed the statistical analysis.", "The protocol was reviewed by {}.")
PROSE_LOCALES = ("en_US", "de_DE", "es_ES", "fr_FR", "it_IT", "en_IN", "nl_NL", "sv_SE")


def person_on_prose(path: Path, redactor: Redactor, skip: int, n: int) -> dict[str, float]:
    """PERSON on technical prose: `n` abstracts of a BEIR corpus (after the first `skip`,
    which were looked at while tuning), as they are (every finding is false) and with one
    Faker name written into each at a sentence boundary (precision and recall of PERSON)."""
    import random

    from faker import Faker

    rows = []
    with (path / "corpus.jsonl").open() as f:
        for i, line in enumerate(f):
            if i >= skip + n:
                break
            if i >= skip:
                row = json.loads(line)
                rows.append(f"{row.get('title', '')}\n{row['text']}")
    rng = random.Random(2718)
    fakers = [Faker(loc) for loc in PROSE_LOCALES]
    for k, faker in enumerate(fakers):
        faker.seed_instance(2718 + k)
    planted: list[Labelled] = []
    for text in rows:
        fake = rng.choice(fakers)
        name = f"{fake.first_name()} {fake.last_name()}"
        form = rng.choice(PROSE_FORMS)
        cuts = [m.end() for m in re.finditer(r"\. (?=[A-Z])", text)] or [len(text)]
        at = rng.choice(cuts)
        sentence = form.format(name)
        lead = " " if at == len(text) else ""
        new = text[:at] + lead + sentence + " " + text[at:]
        start = at + len(lead) + form.index("{}")
        planted.append(Labelled(new, (Span("PERSON", start, start + len(name)),)))
    bare = redactor.analyze(rows)
    false_alone = sum(r.entity_type == "PERSON" for found in bare for r in found)
    q = quality(redactor.analyze, planted)["PERSON"]
    return {"documents": len(rows), "person_findings_unplanted": false_alone,
            "precision": q["precision"], "recall": q["recall"], "masked": q["masked"]}


def report_prose(args: argparse.Namespace, tuned: Redactor) -> dict[str, float]:
    prose = person_on_prose(args.beir, tuned, args.prose_skip, args.prose_docs)
    print(f"\nPERSON on technical prose: {prose['documents']} abstracts of "
          f"{args.beir.name} from no. {args.prose_skip} (not tuned on)")
    print(f"{'as they are: PERSON findings':<40} {prose['person_findings_unplanted']:>6}")
    print(f"{'one planted name each: precision':<40} {prose['precision']:6.3f}")
    print(f"{'one planted name each: recall':<40} {prose['recall']:6.3f}")
    print(f"{'one planted name each: masked whole':<40} {prose['masked']:6.3f}")
    return prose


# Locales reported by --locales: South Asian, East and South-East Asian, Latin American,
# European, African and Central Asian names.
LOCALES = ("en_IN", "en_PK", "es_MX", "pt_BR", "tr_TR", "pl_PL", "nl_NL", "vi_VN", "zh_CN",
           "ja_JP", "id_ID", "yo_NG", "zu_ZA", "sw", "en_TH", "uz_UZ")


def report_locales(args: argparse.Namespace, tuned: Redactor) -> int:
    from services.redaction.names import fold, given_names
    seeds = TUNE_SEEDS if args.tune else (HELDOUT_SEED,)
    earlier = json.loads(args.before.read_text()) if args.before else {}
    before = earlier.get("locales", {})
    rows: dict[str, dict[str, float]] = {}
    for loc in LOCALES:
        corpus = [d for s in seeds for d in conversations(loc, s, args.locale_docs)]
        print(f"  {loc}: {len(corpus)} documents", flush=True)
        people = [d.text[s.start:s.end] for d in corpus for s in d.spans if s.entity == "PERSON"]
        firsts = {p.split()[0] for p in people if " " in p}
        known = sum(fold(f) in given_names() for f in firsts) / len(firsts)
        rows[loc] = quality(tuned.analyze, corpus)["PERSON"] | {"gazetteer": known}
    print(f"\nPERSON on chat transcripts, e-mails and tickets, seed(s) "
          f"{', '.join(map(str, seeds))} ({'tuned on' if args.tune else 'held out'}); "
          f"gazetteer = share of the locale's given names the gazetteer knows")
    head = f"{'locale':<7} {'tuned':>5} {'names':>6} {'gazetteer':>9}"
    if before:
        head += f" {'R before':>9} {'masked before':>14}"
    print(head + f" {'P':>6} {'R':>6} {'masked':>7}")
    for loc, q in rows.items():
        line = (f"{loc:<7} {'yes' if loc in TUNE_LOCALES else 'no':>5} {q['values']:>6} "
                f"{q['gazetteer']:9.2f}")
        if before:
            b = before.get(loc, {})
            line += f" {b.get('recall', float('nan')):9.3f} {b.get('masked', float('nan')):14.3f}"
        print(line + f" {q['precision']:6.3f} {q['recall']:6.3f} {q['masked']:7.3f}")
    print("P, R: token-level PERSON precision and recall; masked: share of names covered "
          "whole")
    prose = None if args.beir is None else report_prose(args, tuned)
    if prose is not None and earlier.get("prose"):
        b = earlier["prose"]
        print(f"before: {b['person_findings_unplanted']} findings as they are, precision "
              f"{b['precision']:.3f}, recall {b['recall']:.3f}, masked {b['masked']:.3f}")
    out = RESULTS / "redaction-locales.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"seeds": list(seeds), "locales": rows, "prose": prose}, indent=2))
    print(f"wrote {out}")
    return 0


def main() -> int:
    if "--forms" in sys.argv[1:]:
        from scripts.benchlib import pii_bench
        return pii_bench.main([a for a in sys.argv[1:] if a != "--forms"])
    ap = argparse.ArgumentParser(prog="bench_redaction", description=__doc__.splitlines()[0])
    ap.add_argument("--forms", action="store_true", help="instead: planted PII in every form, "
                    "ordinary business tokens and speed beside a baseline commit "
                    "(scripts/benchlib/pii_bench.py; --forms --help for its flags)")
    ap.add_argument("--docs-1k", type=int, default=64)
    ap.add_argument("--docs-20k", type=int, default=4)
    ap.add_argument("--eval-texts", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--no-embedding", action="store_true", help="skip the embedding reference")
    ap.add_argument("--beir", type=Path, help="a BEIR collection (corpus.jsonl, queries.jsonl, "
                    "qrels/): nDCG@10 with redaction on and off")
    ap.add_argument("--beir-docs", type=int, help="cut the BEIR corpus to this many documents "
                    "(judged ones first)")
    ap.add_argument("--prose-docs", type=int, default=300, help="abstracts of the BEIR "
                    "corpus for PERSON precision on technical prose")
    ap.add_argument("--prose-skip", type=int, default=2000, help="skip this many first "
                    "(tuning looked at the first 1,300 of SciFact)")
    ap.add_argument("--only-prose", action="store_true", help="with --beir: only the "
                    "technical-prose PERSON figures")
    ap.add_argument("--locales", action="store_true", help="only PERSON per locale on "
                    "chat transcripts, e-mails and tickets (and prose with --beir)")
    ap.add_argument("--locale-docs", type=int, default=40, help="documents per locale and seed")
    ap.add_argument("--tune", action="store_true", help="with --locales: the tuning seeds "
                    "instead of the held-out one")
    ap.add_argument("--before", type=Path, help="with --locales: an earlier "
                    "redaction-locales.json to print beside")
    args = ap.parse_args()
    settings = RedactionSettings()
    if args.locales:
        tuned = Redactor(settings)
        tuned.redact_texts(["warm up Robert Miller +1 415-555-0199"])
        return report_locales(args, tuned)
    print("loading the baseline (Presidio defaults) and the tuned redactor ...", flush=True)
    base, tuned = PresidioDefault(settings), Redactor(settings)
    tuned.redact_texts(["warm up Robert Miller +1 415-555-0199"])
    base.redact(["warm up Robert Miller +1 415-555-0199"])
    if args.only_prose and args.beir is not None:
        report_prose(args, tuned)
        return 0
    sizes = {"1 KB": [c.text for c in labelled_texts(args.docs_1k, 1000, seed=1)],
             "20 KB": [c.text for c in labelled_texts(args.docs_20k, 20_000, seed=2,
                                                      pii_per_text=40)]}
    speed: dict[str, dict[str, dict[str, float]]] = {}
    for size, texts in sizes.items():
        speed[size] = {
            "baseline": throughput(f"baseline {size}", base.redact, texts, args.batch),
            "tuned": throughput(f"tuned {size}", tuned.redact_texts, texts, args.batch)}
        if not args.no_embedding:
            print(f"  embedding reference {size} ...", flush=True)
            speed[size]["embedding"] = embedding_reference(texts, args.batch)
    print("evaluating per-entity quality ...", flush=True)
    corpora = {"templated": labelled_texts(args.eval_texts, 400, seed=3, pii_per_text=2)}
    corpora |= {name: generate(name, args.eval_texts) for name in SLICES}
    quals = {}
    for name, corpus in corpora.items():
        print(f"  {name}: {len(corpus)} documents", flush=True)
        quals[name] = {"baseline": quality(base.analyze, corpus),
                       "tuned": quality(tuned.analyze, corpus)}
    qual = quals["templated"]

    print(f"\n{'docs/s':<8} {'stage':<22} {'wall':>8} {'CPU':>8} {'CPU vs baseline':>16}")
    for size, rows in speed.items():
        base_docs_s = rows["baseline"]["cpu_docs_s"]
        for stage, s in rows.items():
            label = {"baseline": "Presidio defaults", "tuned": "tuned redactor",
                     "embedding": f"embedding ({s.get('chunks_per_doc', 0):.1f} chunks/doc)"}
            print(f"{size:<8} {label[stage]:<22} {s['wall_docs_s']:8.1f} {s['cpu_docs_s']:8.1f} "
                  f"{s['cpu_docs_s'] / base_docs_s:15.2f}x")
    print(f"\n{'entity':<14} {'n':>4} {'P base':>7} {'R base':>7} {'F2 base':>8} "
          f"{'P':>6} {'R':>6} {'F2':>6} {'masked':>7}")
    for e, t in qual["tuned"].items():
        b = qual["baseline"][e]
        print(f"{e:<14} {t['values']:>4} {b['precision']:7.3f} {b['recall']:7.3f} "
              f"{b['f2']:8.3f} {t['precision']:6.3f} {t['recall']:6.3f} {t['f2']:6.3f} "
              f"{t['masked']:7.3f}")
    print("token-level P/R/F2 as presidio-evaluator counts them; masked = share of values "
          "covered whole by some placeholder (tuned)")
    for name in SLICES:
        print(f"\nFaker slice '{name}' ({'NEVER tuned on' if name == 'heldout' else 'tuned on'}"
              f", locales {', '.join(SLICES[name][0])})")
        print(f"{'entity':<14} {'n':>5} {'R base':>7} {'masked base':>12} "
              f"{'P':>6} {'R':>6} {'F2':>6} {'masked':>7}")
        for e, t in quals[name]["tuned"].items():
            b = quals[name]["baseline"][e]
            print(f"{e:<14} {t['values']:>5} {b['recall']:7.3f} {b['masked']:12.3f} "
                  f"{t['precision']:6.3f} {t['recall']:6.3f} {t['f2']:6.3f} {t['masked']:7.3f}")
    utility = None
    if args.beir is not None:
        utility = retrieval_utility(args.beir, tuned, args.beir_docs, args.batch)
        delta = utility["ndcg10_on"] / utility["ndcg10_off"] - 1 if utility["ndcg10_off"] else 0
        print(f"\nretrieval utility on {args.beir.name} ({utility['documents']} documents, "
              f"{utility['queries']} queries, {utility['documents_changed']} changed by "
              f"redaction)")
        print("entities found in it: " + ", ".join(
            f"{k[6:]} {v}" for k, v in utility.items() if k.startswith("found_")))
        print(f"{'redaction':<10} {'nDCG@10':>8}\n{'off':<10} {utility['ndcg10_off']:8.4f}\n"
              f"{'on':<10} {utility['ndcg10_on']:8.4f}   ({delta:+.2%} vs off)")
    prose = None if args.beir is None else report_prose(args, tuned)
    out = RESULTS / "redaction.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"speed": speed, "quality": quals, "utility": utility,
                               "prose": prose},
                              indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
