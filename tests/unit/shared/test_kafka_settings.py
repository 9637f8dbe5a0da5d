"""KafkaSettings: SASL sign-in for Faust and the plain aiokafka clients, or none."""

from __future__ import annotations

import faust
import pytest
from pydantic import SecretStr, ValidationError

from shared.kafka.app import make_app
from shared.settings import KafkaSettings


def test_plaintext_by_default_signs_nothing_in() -> None:
    kafka = KafkaSettings()
    assert (kafka.client_options(), kafka.faust_credentials()) == ({}, None)


def test_sasl_options_for_plain_clients_and_faust() -> None:
    kafka = KafkaSettings(security_protocol="SASL_PLAINTEXT", sasl_username="redaction",
                          sasl_password=SecretStr("s3cret"))
    assert kafka.client_options() == {
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "redaction", "sasl_plain_password": "s3cret",
        "ssl_context": None}
    creds = kafka.faust_credentials()
    assert isinstance(creds, faust.SASLCredentials)
    assert (creds.username, creds.password, creds.mechanism.value, creds.protocol.value) == (
        "redaction", "s3cret", "SCRAM-SHA-512", "SASL_PLAINTEXT")
    assert "s3cret" not in repr(kafka)


def test_sasl_ssl_verifies_the_broker() -> None:
    kafka = KafkaSettings(security_protocol="SASL_SSL", sasl_mechanism="PLAIN",
                          sasl_username="u", sasl_password=SecretStr("p"))
    ctx = kafka.client_options()["ssl_context"]
    assert ctx is not None and ctx.check_hostname
    assert kafka.faust_credentials().protocol.value == "SASL_SSL"


@pytest.mark.parametrize("missing", ["sasl_username", "sasl_password"])
def test_sasl_without_credentials_fails_at_start_naming_the_variables(missing: str) -> None:
    values = {"security_protocol": "SASL_PLAINTEXT", "sasl_username": "u",
              "sasl_password": SecretStr("p"), missing: SecretStr("") if "password" in missing
              else ""}
    with pytest.raises(ValidationError, match="STREAMRAG_KAFKA_SASL_USERNAME and "
                                              "STREAMRAG_KAFKA_SASL_PASSWORD"):
        KafkaSettings(**values)


def test_env_configures_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMRAG_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("STREAMRAG_KAFKA_SASL_USERNAME", "ledger")
    monkeypatch.setenv("STREAMRAG_KAFKA_SASL_PASSWORD", "pw")
    assert KafkaSettings().client_options()["sasl_plain_username"] == "ledger"


def test_faust_apps_sign_in_and_under_acls_create_no_topics(tmp_path: object) -> None:
    from pathlib import Path
    sasl = KafkaSettings(security_protocol="SASL_PLAINTEXT", sasl_username="chunking",
                         sasl_password=SecretStr("pw"))
    app = make_app("test-sasl-app", sasl, Path(str(tmp_path)))
    assert app.conf.broker_credentials.username == "chunking"
    assert app.conf.topic_allow_declare is False
    plain = make_app("test-plain-app", KafkaSettings(), Path(str(tmp_path)))
    assert plain.conf.broker_credentials is None and plain.conf.topic_allow_declare is True


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_the_mesh_producers_compress_by_setting_and_every_codec_decodes(
        codec: str, tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from aiokafka.codec import has_lz4, has_snappy, has_zstd
    monkeypatch.setenv("STREAMRAG_KAFKA_PRODUCER_COMPRESSION", codec)
    app = make_app(f"test-{codec}-app", KafkaSettings(), Path(str(tmp_path)))
    assert app.conf.producer_compression_type == codec
    # A consumer without the codec libraries stops at the first such batch.
    assert (has_snappy(), has_lz4(), has_zstd()) == (True, True, True)


def test_uncompressed_by_default(tmp_path: object) -> None:
    from pathlib import Path
    app = make_app("test-nocodec-app", KafkaSettings(), Path(str(tmp_path)))
    assert app.conf.producer_compression_type is None


def test_min_insync_above_the_replication_factor_fails_naming_both_variables() -> None:
    with pytest.raises(ValidationError, match="STREAMRAG_KAFKA_MIN_INSYNC_REPLICAS=3 exceeds "
                                              "STREAMRAG_KAFKA_REPLICATION_FACTOR=2"):
        KafkaSettings(replication_factor=2, min_insync_replicas=3)
    assert KafkaSettings(replication_factor=3, min_insync_replicas=2).min_insync_replicas == 2


def test_plain_producers_wait_for_every_insync_replica_idempotent_only_by_setting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Kafka gives every producer an id: idempotence is on unless turned off.
    assert KafkaSettings().producer_options() == {"acks": "all", "enable_idempotence": True}
    monkeypatch.setenv("STREAMRAG_KAFKA_PRODUCER_IDEMPOTENCE", "false")
    assert KafkaSettings().producer_options() == {"acks": "all", "enable_idempotence": False}


@pytest.mark.parametrize("idempotence", [True, False])
def test_faust_producers_take_acks_all_and_the_idempotence_setting(
        idempotence: bool, tmp_path: object) -> None:
    import asyncio
    from pathlib import Path

    kafka = KafkaSettings(producer_idempotence=idempotence)
    app = make_app(f"test-acks-{idempotence}", kafka, Path(str(tmp_path)))
    assert app.conf.producer_acks == -1

    async def built() -> tuple[int | str, bool]:
        producer = app.producer._new_producer()  # built, never started: no broker needed
        try:
            return producer._sender._acks, producer._txn_manager is not None
        finally:
            await producer.stop()
    acks, has_producer_id = asyncio.run(built())
    assert acks in (-1, "all")
    assert has_producer_id is idempotence  # aiokafka asks for a producer id only then
