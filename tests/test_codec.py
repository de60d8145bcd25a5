"""The payload codec, key rotation and errors, env at rest in the store, and the codec server."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from google.protobuf import json_format
from sqlalchemy import text
from temporalio.api.common.v1 import Payload, Payloads

from weft.activities.crypto import CryptoKeyError, Keyring, new_key, parse_keys
from weft.contract.activities import ThreadInitInput
from weft.contract.thread import ThreadStartInput
from weft.store import Store, ThreadRow
from weft.transport.codec import EncryptionCodec, data_converter, is_encrypted
from weft.workers.codec_server import COOKIE, CodecServer
from weft.workers.config import ConfigError, WeftConfig, load_config
from weft.workers.secrets import ensure_dev_keys, load_keyring

UI = "http://127.0.0.1:8233"


def _keyring(*entries: str) -> Keyring:
    return parse_keys(entries, source="test")


async def test_only_payloads_carrying_env_are_encrypted():
    """Start and thread.init inputs with env are sealed; other values stay plain JSON."""
    converter = data_converter(_keyring(f"k1:{new_key()}"))
    start = ThreadStartInput(agent="a", env={"TOKEN": "hunter2"})
    init = ThreadInitInput(thread_id="t", agent="a", env={"TOKEN": "hunter2"})
    no_env = ThreadStartInput(agent="a")
    encoded = await converter.encode([start, init, no_env, {"role": "user", "content": "hi"}])
    assert [is_encrypted(p) for p in encoded] == [True, True, False, False]
    assert all(b"hunter2" not in p.SerializeToString() for p in encoded)
    decoded = await converter.decode(
        encoded, [ThreadStartInput, ThreadInitInput, ThreadStartInput, dict]
    )
    assert decoded[0].env == {"TOKEN": "hunter2"} and decoded[1].env == {"TOKEN": "hunter2"}


async def test_encrypt_all_mode_seals_every_payload():
    """With encrypt=all every payload is sealed, and still decodes."""
    converter = data_converter(_keyring(f"k1:{new_key()}"), encrypt="all")
    encoded = await converter.encode([{"content": "hello"}, 3])
    assert all(is_encrypted(p) for p in encoded)
    assert await converter.decode(encoded) == [{"content": "hello"}, 3]


async def test_payloads_it_did_not_encrypt_pass_through():
    """Plain JSON from another service decodes unchanged."""
    codec = EncryptionCodec(_keyring(f"k1:{new_key()}"))
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b'{"role":"user"}')
    assert await codec.decode([plain]) == [plain]


async def test_rotated_keys_still_decode_old_payloads():
    """After a new active key, payloads sealed with the old key id still decode."""
    old = f"k1:{new_key()}"
    sealed = await EncryptionCodec(_keyring(old), encrypt="all").encode(
        [Payload(metadata={"encoding": b"json/plain"}, data=b'"v1"')]
    )
    rotated = EncryptionCodec(_keyring(f"k2:{new_key()}", old), encrypt="all")
    assert (await rotated.decode(sealed))[0].data == b'"v1"'
    fresh = await rotated.encode([Payload(metadata={"encoding": b"json/plain"}, data=b'"v2"')])
    assert fresh[0].metadata["encryption-key-id"] == b"k2"


async def test_missing_or_wrong_key_is_a_clear_error():
    """A payload sealed with an unknown key id, or a different key, fails naming the key."""
    sealed = await EncryptionCodec(_keyring(f"k1:{new_key()}"), encrypt="all").encode(
        [Payload(metadata={"encoding": b"json/plain"}, data=b"1")]
    )
    with pytest.raises(CryptoKeyError, match="key 'k1', which is not configured.*k2"):
        await EncryptionCodec(_keyring(f"k2:{new_key()}")).decode(sealed)
    with pytest.raises(CryptoKeyError, match="key 'k1' does not open this data"):
        await EncryptionCodec(_keyring(f"k1:{new_key()}")).decode(sealed)


def test_malformed_keys_are_rejected_naming_the_source(tmp_path: Path) -> None:
    """Bad base64, a short key, a missing id and duplicate ids are config errors."""
    cases = {
        "k1:not base64!!": "not valid base64",
        f"k1:{base64.b64encode(b'short').decode()}": "must be 32 bytes",
        "just-a-key": "expected 'id:base64key'",
        f"k1:{new_key()},k1:{new_key()}": "appears twice",
    }
    no_file = {"WEFT_CONFIG": str(tmp_path / "none.yml")}
    for value, message in cases.items():
        with pytest.raises(ConfigError, match=message):
            load_keyring(load_config(environ={**no_file, "WEFT_CODEC_KEYS": value}))
    with pytest.raises(ConfigError, match="WEFT_CODEC_ENCRYPT"):
        load_config(environ={**no_file, "WEFT_CODEC_ENCRYPT": "some"})


def test_keys_come_from_env_or_file_and_dev_makes_one(tmp_path: Path) -> None:
    """No keys means no encryption; `weft dev` writes a private keys file that is reused."""
    config = WeftConfig(root=tmp_path)
    assert load_keyring(config) is None
    made = ensure_dev_keys(config)
    keys_file = tmp_path / ".weft" / "codec.keys"
    assert keys_file.stat().st_mode & 0o777 == 0o600
    again = load_keyring(config)
    assert again is not None and again.key_ids == made.key_ids == ["dev-1"]
    config.codec.keys = f"prod-2:{new_key()},{keys_file.read_text().splitlines()[1]}"
    assert load_keyring(config).key_ids == ["prod-2", "dev-1"]  # type: ignore[union-attr]


def test_store_seals_thread_env(tmp_path: Path) -> None:
    """The env column holds an envelope bound to the thread; reading needs the key."""
    keyring = _keyring(f"k1:{new_key()}")
    url = f"sqlite:///{tmp_path / 'weft.db'}"
    row = ThreadRow(
        thread_id="t1", agent="a", status="running", created_at=datetime.now(UTC),
        env={"TOKEN": "hunter2", "CITY": {"value": "Oslo", "type": "text"}},
    )  # fmt: skip
    with Store.open(url, keyring=keyring) as store:
        store.threads.upsert(row)
        assert store.threads.get("t1").env == row.env  # type: ignore[union-attr]
        with store.engine.connect() as connection:
            column = connection.scalar(text("SELECT env FROM threads"))
        assert "hunter2" not in str(column) and "$weftEncrypted" in str(column)
        # Moving the sealed env to another thread's row does not open it.
        with store.engine.begin() as connection:
            connection.execute(text("UPDATE threads SET thread_id = 't2'"))
        with pytest.raises(CryptoKeyError, match="does not open"):
            store.threads.get("t2")
    with Store.open(url) as keyless, pytest.raises(CryptoKeyError, match="no keys are configured"):
        keyless.threads.get("t2")


def _payloads_json(*payloads: Payload) -> str:
    return json_format.MessageToJson(Payloads(payloads=list(payloads)))


@pytest.fixture
def codec_server():
    """A codec server on a free port with token `s3cret` and the UI origin allowed."""
    codec = EncryptionCodec(_keyring(f"k1:{new_key()}"))
    with CodecServer(codec, token="s3cret", allow_origin=UI, port=0) as server:
        yield server


def test_codec_server_requires_the_bearer_token(codec_server):
    """/decode without a token, or with a wrong one, is 401; with it, 200."""
    body = _payloads_json(Payload(metadata={"encoding": b"json/plain"}, data=b"1"))
    with httpx.Client(base_url=codec_server.url) as http:
        assert http.post("/decode", content=body).status_code == 401
        wrong = http.post("/decode", content=body, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        right = http.post("/decode", content=body, headers={"Authorization": "Bearer s3cret"})
        assert right.status_code == 200


def test_codec_server_round_trips_per_the_remote_codec_protocol(codec_server):
    """/encode seals every payload with the key id; /decode restores the exact payloads."""
    original = Payload(metadata={"encoding": b"json/plain"}, data=b'{"TOKEN":"hunter2"}')
    auth = {"Authorization": "Bearer s3cret", "Content-Type": "application/json"}
    with httpx.Client(base_url=codec_server.url, headers=auth) as http:
        encoded = http.post("/encode", content=_payloads_json(original))
        assert encoded.status_code == 200
        sealed = json_format.Parse(encoded.content, Payloads()).payloads[0]
        assert sealed.metadata["encoding"] == b"binary/encrypted"
        assert sealed.metadata["encryption-key-id"] == b"k1"
        assert b"hunter2" not in sealed.data
        decoded = http.post("/decode", content=encoded.content)
        assert json_format.Parse(decoded.content, Payloads()).payloads[0] == original
        bad = http.post("/decode", content=b"{not json")
        assert bad.status_code == 400 and "Payloads" in bad.json()["error"]


def test_codec_server_allows_only_the_ui_origin(codec_server):
    """Preflight and calls from the UI's origin get CORS headers; other origins get 403."""
    preflight = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type,x-namespace",
    }
    body = _payloads_json(Payload(metadata={"encoding": b"json/plain"}, data=b"1"))
    with httpx.Client(base_url=codec_server.url) as http:
        ok = http.options("/decode", headers={**preflight, "Origin": UI})
        assert ok.status_code == 204
        assert ok.headers["access-control-allow-origin"] == UI
        assert "authorization" in ok.headers["access-control-allow-headers"].lower()
        evil = http.options("/decode", headers={**preflight, "Origin": "http://evil.test"})
        assert evil.status_code == 403 and "access-control-allow-origin" not in evil.headers
        call = http.post(
            "/decode",
            content=body,
            headers={"Origin": "http://evil.test", "Authorization": "Bearer s3cret"},
        )
        assert call.status_code == 403 and "access-control-allow-origin" not in call.headers
        allowed = http.post(
            "/decode", content=body, headers={"Origin": UI, "Authorization": "Bearer s3cret"}
        )
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == UI


def test_browser_login_sets_a_cookie_the_ui_can_send(codec_server):
    """POST /login with the token sets an HttpOnly cookie that authorises /decode."""
    body = _payloads_json(Payload(metadata={"encoding": b"json/plain"}, data=b"1"))
    with httpx.Client(base_url=codec_server.url) as http:
        assert http.post("/login", data={"token": "wrong"}).status_code == 401
        login = http.post("/login", data={"token": "s3cret"})
        assert login.status_code == 200
        assert "HttpOnly" in login.headers["set-cookie"]
        assert "SameSite=Strict" in login.headers["set-cookie"]
        cookie = {"Cookie": f"{COOKIE}={http.cookies[COOKIE]}", "Origin": UI}
        assert http.post("/decode", content=body, headers=cookie).status_code == 200
        forged = http.post("/login", data={"token": "s3cret"}, headers={"Origin": "http://x"})
        assert forged.status_code == 403


def test_cli_codec_key_prints_a_usable_key(capsys):
    """`weft codec-key --id k9` prints an entry the keys parser accepts."""
    from weft.cli.main import run

    assert run(["codec-key", "--id", "k9"]) == 0
    entry = capsys.readouterr().out.strip()
    assert _keyring(entry).key_ids == ["k9"]


def test_cli_codec_server_without_keys_fails_clearly(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`weft codec-server` with no keys exits 1 and says how to configure them."""
    from weft.cli.main import run

    monkeypatch.setenv("WEFT_CONFIG", str(tmp_path / "none.yml"))
    monkeypatch.delenv("WEFT_CODEC_KEYS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert run(["codec-server"]) == 1
    assert "no encryption keys: set WEFT_CODEC_KEYS" in capsys.readouterr().err


def test_codec_server_answers_an_empty_batch_with_a_payloads_list(codec_server):
    """An empty batch comes back as `{"payloads": []}`, which the UI expects."""
    with httpx.Client(base_url=codec_server.url) as http:
        reply = http.post(
            "/decode", content=b'{"payloads": []}', headers={"Authorization": "Bearer s3cret"}
        )
    assert reply.json() == {"payloads": []}
