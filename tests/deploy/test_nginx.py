"""docs/deploy.md's nginx configuration, as written there, in front of a real gunicorn Quarry.

The `nginx` block is taken from the page; only what a test machine must change is changed
(addresses and ports, the certificate's paths), each exactly once, so a test failing here
means the documented configuration fails. nginx is Debian's (`apt-get install nginx`;
.ci/run installs it); without it these tests are skipped with a reason pytest prints.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from app.config import SETTINGS
from tests.conftest import pg_database
from tests.console.conftest import PASSWORD, SECRET_KEY, USER, _add_user_and_token
from tests.live import ROOT, free_port, quarry_env, serving

pytestmark = pytest.mark.slow

NGINX = os.environ.get("QUARRY_TEST_NGINX") or shutil.which("nginx") or "/usr/sbin/nginx"
DEPLOY_MD = ROOT / "docs" / "deploy.md"
# An upload larger than the 16 MB every other route is allowed (the size that got nginx's
# own HTML 413 before /api/files/ had a location of its own).
UPLOAD_ROWS = 360_000


def documented_config() -> str:
    (block,) = re.findall(r"^```nginx\n(.*?)^```$", DEPLOY_MD.read_text(), re.S | re.M)
    return block


def _replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"docs/deploy.md's nginx block no longer has {old!r} once"
    return text.replace(old, new)


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, as the proxy's TLS certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "fullchain.pem", folder / "privkey.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def _nginx_conf(prefix: Path, upstream: int, http: int, https: int, cert: Path,
                key: Path) -> str:
    site = documented_config()
    site = _replace_once(site, "server 127.0.0.1:47334;", f"server 127.0.0.1:{upstream};")
    site = _replace_once(site, "listen 80;", f"listen 127.0.0.1:{http};")
    site = _replace_once(site, "listen 443 ssl;", f"listen 127.0.0.1:{https} ssl;")
    site = _replace_once(site, "/etc/ssl/quarry/fullchain.pem", str(cert))
    site = _replace_once(site, "/etc/ssl/quarry/privkey.pem", str(key))
    temp = "\n".join(f"    {kind}_temp_path {prefix}/{kind};"
                     for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    # As root (CI), nginx would hand its workers to "nobody", who cannot enter pytest's
    # private temporary folders.
    user = "user root;\n" if os.geteuid() == 0 else ""
    return (f"{user}daemon off;\nworker_processes 1;\npid {prefix}/nginx.pid;\n"
            f"error_log {prefix}/error.log warn;\nevents {{ worker_connections 64; }}\n"
            f"http {{\n    access_log {prefix}/access.log;\n{temp}\n{site}}}\n")


def _wait_listening(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert process.poll() is None, log.read_text() if log.exists() else "nginx ended"
            assert time.monotonic() < deadline, "nginx did not start"
            time.sleep(0.05)


@pytest.fixture(scope="module")
def proxied(tmp_path_factory, sqlite_template) -> Iterator[dict]:
    """gunicorn Quarry (sign-in on, QUARRY_PROXY_HOPS=1, a PostgreSQL source) behind nginx."""
    if not (os.path.isfile(NGINX) and os.access(NGINX, os.X_OK)):
        pytest.skip(f"NGINX TESTS SKIPPED: {NGINX} is missing; install Debian's nginx "
                    "(apt-get install nginx)")
    tmp = tmp_path_factory.mktemp("proxied")
    prefix = tmp / "nginx"
    prefix.mkdir()
    cert, key = _certificate(prefix)
    with pg_database("quarry_proxied") as source:
        shutil.copy(sqlite_template, tmp / "store.db")  # migrated once for the session
        env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{tmp}/store.db",
                         QUARRY_INSTANCE_PATH=str(tmp), QUARRY_WORKERS="1", QUARRY_THREADS="4",
                         QUARRY_PROXY_HOPS="1", QUARRY_AUTH_REQUIRED="true",
                         QUARRY_SECRET_KEY=SECRET_KEY, QUARRY_DEMO_SOURCE="false",
                         QUARRY_FILES_DIR=str(tmp / "files"),
                         QUARRY_DATA_SOURCES=json.dumps({"pg": source}))
        token = _add_user_and_token(env)
        with serving(env, tmp / "gunicorn") as live:
            http, https = free_port(), free_port()
            conf = prefix / "nginx.conf"
            conf.write_text(_nginx_conf(prefix, int(live.url.rsplit(":", 1)[1]), http, https,
                                        cert, key))
            with open(prefix / "stderr.log", "w") as err:
                nginx = subprocess.Popen([NGINX, "-p", str(prefix), "-c", str(conf),
                                          "-e", str(prefix / "error.log")],
                                         stdout=subprocess.DEVNULL, stderr=err)
            try:
                _wait_listening(https, nginx, prefix / "error.log")
                yield {"url": f"https://127.0.0.1:{https}", "http": f"http://127.0.0.1:{http}",
                       "cert": str(cert), "token": token, "port": https, "logs": prefix}
            finally:
                nginx.send_signal(signal.SIGTERM)  # fast shutdown
                nginx.wait(timeout=30)


def call(server, method: str, path: str, *, session: requests.Session | None = None,
         token: bool = True, **kwargs) -> requests.Response:
    headers = kwargs.pop("headers", {})
    if token:
        headers["Authorization"] = f"Bearer {server['token']}"
    return (session or requests).request(method, server["url"] + path, headers=headers,
                                         verify=server["cert"], timeout=120, **kwargs)


def test_the_documented_upload_location_holds_the_files_limit():
    (files_limit,) = [s.default for s in SETTINGS if s.name == "FILES_MAX_BYTES"]
    (data_limit,) = [s.default for s in SETTINGS if s.name == "MAX_DATA_BODY_BYTES"]
    config = documented_config()
    location = config.split("location /api/files/ {", 1)[1].split("}", 1)[0]
    size = re.search(r"client_max_body_size (\d+)m;", location)
    # Above Quarry's own limit (the form's part headers come on top of the file), so that
    # Quarry, not nginx, answers a file too large, with its problem document.
    assert files_limit < int(size.group(1)) * 2**20 <= files_limit + 2**20
    assert "proxy_request_buffering off;" in location
    assert int(re.search(r"proxy_read_timeout (\d+)s;", location).group(1)) >= 300
    assert f"client_max_body_size {data_limit // 2**20}m;" in config


def test_an_upload_larger_than_16_mb_passes_the_proxy(proxied):
    body = "".join(f"{i},row {i:07d} of the upload through nginx,{i / 4}\n"
                   for i in range(UPLOAD_ROWS))
    data = ("id,label,amount\n" + body).encode()
    assert len(data) > 18 * 2**20
    answer = call(proxied, "PUT", "/api/files/big_upload",
                  files={"file": ("big.csv", data, "text/csv")})
    assert answer.status_code == 200, answer.text[:500]
    assert answer.json()["row_count"] == UPLOAD_ROWS
    counted = call(proxied, "POST", "/api/sql/query",
                   json={"query": "SELECT count(*) AS n, max(id) AS top FROM files.big_upload"})
    assert counted.json()["data"] == [[UPLOAD_ROWS, UPLOAD_ROWS - 1]]
    # JSON bodies keep the 16 MB cap: nginx refuses a larger one before Quarry reads it.
    too_big = call(proxied, "POST", "/api/sql/query", data=b" " * (17 * 2**20),
                   headers={"Content-Type": "application/json"})
    assert too_big.status_code == 413


def test_a_streamed_answer_arrives_batch_by_batch(proxied):
    # The first 1 000 rows (Quarry's first batch) come at once; row 1 001 takes 1.5 s more.
    started = time.monotonic()
    with call(proxied, "POST", "/api/sql/query", stream=True, json={
            "query": "SELECT g, pg_sleep(CASE WHEN g = 1001 THEN 1.5 ELSE 0 END) IS NULL AS s "
                     "FROM generate_series(1, 1001) AS g",
            "context": {"db": "pg"}, "response_format": "jsonlines"}) as answer:
        assert answer.status_code == 200
        lines = answer.iter_lines()
        assert "query_id" in json.loads(next(lines))
        first = json.loads(next(lines))
        first_at = time.monotonic() - started
        assert len(first) == 1000 and first[0][0] == 1
        rest = [json.loads(line) for line in lines if line]
    ended_at = time.monotonic() - started
    assert rest[0] == [[1001, False]] and "row_count" in rest[-1]
    assert ended_at >= 1.5 and first_at < ended_at - 1.0, (first_at, ended_at)


def test_the_console_and_its_policy_pass_the_proxy(proxied):
    page = call(proxied, "GET", "/console", token=False)
    assert page.status_code == 200
    (nonce,) = re.findall(r'<meta property="csp-nonce" nonce="([^"]+)">', page.text)
    policy = page.headers["Content-Security-Policy"]
    assert f"style-src 'self' 'nonce-{nonce}'" in policy and "unsafe-inline" not in policy
    assert page.headers["Strict-Transport-Security"] == "max-age=31536000"
    assert page.headers["X-Frame-Options"] == "DENY"
    script = call(proxied, "GET", "/console/static/console.js", token=False,
                  headers={"Accept-Encoding": "gzip"})
    assert script.status_code == 200 and script.headers["Content-Encoding"] == "gzip"
    assert b"codemirror" in script.content.lower()


def test_sign_in_behind_tls_gives_a_secure_cookie_and_https_origin(proxied):
    # The plain-HTTP server of the page sends every request to HTTPS.
    plain = requests.get(proxied["http"] + "/api/login", allow_redirects=False, timeout=10)
    assert plain.status_code == 301
    assert plain.headers["Location"].startswith("https://127.0.0.1")
    session = requests.Session()
    # nginx writes X-Forwarded-Proto itself: a client's own is replaced, not believed.
    signed_in = call(proxied, "POST", "/api/login", session=session, token=False,
                     headers={"X-Forwarded-Proto": "http"},
                     json={"username": USER, "password": PASSWORD})
    assert signed_in.status_code == 200, signed_in.text
    cookie = signed_in.headers["Set-Cookie"]
    assert "; Secure" in cookie and "; HttpOnly" in cookie and "SameSite=Lax" in cookie
    # Quarry sees itself as https://127.0.0.1:<port> (X-Forwarded-Proto, -Host, -Port): a
    # browser's change from that origin is its own, from the http:// one it is not.
    own = f"https://127.0.0.1:{proxied['port']}"
    refused = call(proxied, "DELETE", "/api/console/history", session=session, token=False,
                   headers={"Origin": own.replace("https:", "http:")})
    assert refused.status_code == 403, refused.text
    allowed = call(proxied, "DELETE", "/api/console/history", session=session, token=False,
                   headers={"Origin": own})
    assert allowed.status_code in (200, 204), allowed.text
    out = call(proxied, "POST", "/api/logout", session=session, token=False,
               headers={"Origin": own})
    assert out.status_code in (200, 204), out.text
    assert call(proxied, "GET", "/api/console/history", session=session, token=False
                ).status_code == 401
