//! PostgreSQL through a transaction-mode pooler (PgBouncer's
//! `pool_mode = transaction`): connections whose statements never leave a
//! prepared statement on the server.
//!
//! In transaction mode the pooler hands the client a server connection per
//! transaction, and outside an explicit transaction per `Sync`: what
//! tokio-postgres sends as two exchanges, `Parse` of a named statement
//! (`s12`) and later its `Bind`, can land on two server connections
//! (`prepared statement "s12" does not exist`), and a name left on a server
//! meets another client's same name (`prepared statement "s0" already
//! exists`). PgBouncer before 1.21 keeps no statements for its clients.
//!
//! [`establish`] opens the connection through [`Unnamed`], a rewrite of the
//! wire between tokio-postgres and the socket, so diesel-async and its
//! statement cache stay as they are:
//! - a `Parse` of a named statement is sent as a `Parse` of the unnamed one
//!   (and its `Describe` likewise), and its text and parameter types are
//!   kept on the client, under the name, with its key: `fs_` and a 128-bit
//!   hash of the text and types, the same for any client's same statement;
//! - outside a transaction (the last `ReadyForQuery` said idle), an
//!   exchange that begins with a `Bind` of a named statement binds the
//!   statement under its key, which whatever server connection the pooler
//!   picks may keep from an earlier exchange, parsed and with its plan
//!   cached as a direct connection's. If that server connection has no
//!   such statement (`26000`), or its plan can no longer answer the same
//!   columns (`0A000`, after a schema change), the refusal (the `Bind`
//!   failed, the implicit transaction did nothing) is taken out of the
//!   answer and the exchange is sent again as `Close`, `Parse` under the
//!   key, `Bind`, ...: one exchange, so one server connection, which keeps
//!   it. Exchanges the client writes behind a tried one wait for its
//!   answer, so answers keep their order;
//! - inside a transaction, a `Bind` of a named statement is sent as a
//!   `Parse` of the unnamed statement with that text, then a `Bind` of it,
//!   in the same flight before the same `Sync`: one exchange, so one server
//!   connection (a refusal there would abort the transaction);
//! - the `ParseComplete`s and `CloseComplete`s the client did not ask for
//!   are taken out of the answer; a client's `Close` passes unchanged
//!   (closing a name the server never had is no error) and forgets the
//!   text.
//!
//! So no name of the client's reaches the server, and a key names one text
//! on every server connection; the statement log counts what it always
//! counts, and a cached statement still costs one round trip (two the
//! first time a server connection meets it). Re-parsing and re-planning
//! every statement, as the unnamed statement alone did, cost the claim +
//! succeed work through PgBouncer half its throughput (see SCHEMA.md,
//! "Through PgBouncer: where the time goes").
//!
//! The store sets no session state on PostgreSQL (diesel-async's
//! `TIME ZONE` and `CLIENT_ENCODING` are parameters PgBouncer tracks per
//! client), holds no session advisory lock and uses no LISTEN/NOTIFY.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use diesel::ConnectionError;
use diesel::result::ConnectionResult;
use diesel_async::AsyncPgConnection;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::{Host, TargetSessionAttrs};
use tokio_postgres::{Config, NoTls};

/// The longest a connection attempt to one host may take when the URL sets
/// no `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What [`Unnamed`] rides on: a TCP or a unix socket.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Opens a connection to `url` whose statements are safe on a pooled
/// server connection ([`Unnamed`]). Hosts are tried in order, as
/// tokio-postgres tries them; with `target_session_attrs=read-write` one
/// whose server answers `transaction_read_only = on` is passed over.
pub(crate) async fn establish(url: &str) -> ConnectionResult<AsyncPgConnection> {
    let config: Config = url
        .parse()
        .map_err(|err: tokio_postgres::Error| ConnectionError::BadConnection(err.to_string()))?;
    let ports = config.get_ports();
    let mut last = None;
    for (i, host) in config.get_hosts().iter().enumerate() {
        let port = ports
            .get(i)
            .or_else(|| ports.first())
            .copied()
            .unwrap_or(5432);
        let within = config
            .get_connect_timeout()
            .copied()
            .unwrap_or(CONNECT_TIMEOUT);
        match tokio::time::timeout(within, connect_one(&config, host, port)).await {
            Ok(Ok(conn)) => return Ok(conn),
            Ok(Err(err)) => last = Some(err),
            Err(_) => last = Some(format!("timeout waiting for server after {within:?}")),
        }
    }
    Err(ConnectionError::BadConnection(last.map_or_else(
        || String::from("no host in the URL"),
        |err| format!("error connecting to server: {err}"),
    )))
}

/// One host of [`establish`].
async fn connect_one(config: &Config, host: &Host, port: u16) -> Result<AsyncPgConnection, String> {
    let io: Box<dyn Io> = match host {
        Host::Tcp(name) => {
            let stream = tokio::net::TcpStream::connect((name.as_str(), port))
                .await
                .map_err(|err| err.to_string())?;
            stream.set_nodelay(true).map_err(|err| err.to_string())?;
            Box::new(stream)
        }
        #[cfg(unix)]
        Host::Unix(dir) => Box::new(
            tokio::net::UnixStream::connect(dir.join(format!(".s.PGSQL.{port}")))
                .await
                .map_err(|err| err.to_string())?,
        ),
    };
    let (client, connection) = config
        .connect_raw(Unnamed::new(io), NoTls)
        .await
        .map_err(|err| err.to_string())?;
    tokio::spawn(async move {
        if let Err(err) = connection.await {
            tracing::debug!(error = %err, "pooled PostgreSQL connection ended");
        }
    });
    if config.get_target_session_attrs() == TargetSessionAttrs::ReadWrite {
        let answer = client
            .simple_query("SHOW transaction_read_only")
            .await
            .map_err(|err| err.to_string())?;
        let read_only = answer.iter().any(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0) == Some("on"),
            _ => false,
        });
        if read_only {
            return Err(String::from("the server is read-only"));
        }
    }
    AsyncPgConnection::try_from(client)
        .await
        .map_err(|err| err.to_string())
}

/// The wire between tokio-postgres and the socket, rewritten so that no
/// named statement reaches the server (see the module doc).
struct Unnamed<S> {
    /// The socket.
    inner: S,
    /// Bytes the client wrote, not yet a whole message.
    from_client: Vec<u8>,
    /// Rewritten bytes not yet written to the socket, and how many of them
    /// were.
    to_server: Vec<u8>,
    sent: usize,
    /// Bytes the server sent, not yet a whole message.
    from_server: Vec<u8>,
    /// Answer bytes not yet read by the client, and how many of them were.
    to_client: Vec<u8>,
    read: usize,
    /// Whether the untyped startup message has passed.
    started: bool,
    /// Each named statement the client prepared: its `Parse` body after
    /// the name (the text, then the parameter types) and its key.
    statements: HashMap<Vec<u8>, Statement>,
    /// The exchange being written (up to its `Sync`).
    current: Exchange,
    /// Whether the exchange being written has a message yet.
    begun: bool,
    /// Per exchange sent and not yet answered in full (its
    /// `ReadyForQuery`): what its answer holds that the client did not ask
    /// for.
    exchanges: VecDeque<Exchange>,
    /// Whether the last `ReadyForQuery` said idle (no transaction open).
    idle: bool,
}

/// A named statement of the client, as [`Unnamed`] keeps it.
struct Statement {
    /// Its `Parse` body after the name: the text, then the parameter types.
    parse: Vec<u8>,
    /// Its name on the server ([`key`]): the same for the same text and
    /// types, whatever client prepared it.
    key: Vec<u8>,
}

/// An exchange (the messages up to a `Sync`) as [`Unnamed`] rewrote it.
#[derive(Debug, Default, PartialEq, Eq)]
struct Exchange {
    /// `ParseComplete`s of added `Parse` messages its answer still holds.
    parses: u32,
    /// `CloseComplete`s of added `Close` messages its answer still holds.
    closes: u32,
    /// An exchange that tried the statement the server may keep under its
    /// key: the same exchange with the statement closed and parsed under
    /// the key first, and that one's added `ParseComplete`s; sent if the
    /// server answers that it has no such statement, or that its plan went
    /// stale.
    retry: Option<(Vec<u8>, u32)>,
    /// Whether the answer has begun.
    answered: bool,
    /// Whether the answer is the tried statement's refusal, taken out up to
    /// its `ReadyForQuery`.
    refused: bool,
}

impl<S> Unnamed<S> {
    fn new(inner: S) -> Self {
        Self {
            inner,
            from_client: Vec::new(),
            to_server: Vec::new(),
            sent: 0,
            from_server: Vec::new(),
            to_client: Vec::new(),
            read: 0,
            started: false,
            statements: HashMap::new(),
            current: Exchange::default(),
            begun: false,
            // The startup exchange ends with a `ReadyForQuery` too.
            exchanges: VecDeque::from([Exchange::default()]),
            idle: false,
        }
    }

    /// Rewrites every whole message the client wrote into `to_server`.
    fn rewrite_client(&mut self) {
        let mut at = 0;
        loop {
            let rest = &self.from_client[at..];
            if !self.started {
                // Startup: a length (counting itself) and the body, no type.
                let Some(len) = length(rest, 0) else { break };
                if rest.len() < len {
                    break;
                }
                self.to_server.extend_from_slice(&rest[..len]);
                self.started = true;
                at += len;
                continue;
            }
            // Behind an exchange that may be sent again, nothing is sent:
            // its answer must come first.
            if self.exchanges.iter().any(|e| e.retry.is_some()) {
                break;
            }
            let Some(len) = length(rest, 1) else { break };
            if rest.len() < 1 + len {
                break;
            }
            let (kind, body) = (rest[0], rest[5..=len].to_vec());
            at += 1 + len;
            self.rewrite_message(kind, &body);
        }
        self.from_client.drain(..at);
    }

    /// Appends a message to what goes to the server, and to the exchange's
    /// retry if it has one.
    fn out(&mut self, kind: u8, parts: &[&[u8]]) {
        push(&mut self.to_server, kind, parts);
        if let Some((retry, _)) = &mut self.current.retry {
            push(retry, kind, parts);
        }
    }

    /// Rewrites one client message of `kind` with `body`.
    fn rewrite_message(&mut self, kind: u8, body: &[u8]) {
        let first = !std::mem::replace(&mut self.begun, true);
        match kind {
            b'P' => {
                let (name, rest) = cstr(body);
                if !name.is_empty() {
                    let statement = Statement {
                        parse: rest.to_vec(),
                        key: key(rest),
                    };
                    self.statements.insert(name.to_vec(), statement);
                }
                self.out(b'P', &[b"\0", rest]);
            }
            b'D' if body.first() == Some(&b'S') => {
                self.out(b'D', &[b"S\0"]);
            }
            b'B' => {
                let (portal, after) = cstr(body);
                let (name, rest) = cstr(after);
                let Some(statement) = self.statements.get(name).filter(|_| !name.is_empty()) else {
                    self.out(b'B', &[body]);
                    return;
                };
                let (parse, key) = (statement.parse.clone(), statement.key.clone());
                if first && self.idle && self.exchanges.is_empty() {
                    // Outside a transaction, the exchange first tries the
                    // statement the server connection may keep under its
                    // key; a refusal there ends an implicit transaction
                    // that did nothing, and the retry parses it.
                    let mut retry = Vec::new();
                    push(&mut retry, b'C', &[b"S", &key, b"\0"]);
                    push(&mut retry, b'P', &[&key, b"\0", &parse]);
                    push(&mut retry, b'B', &[portal, b"\0", &key, b"\0", rest]);
                    push(
                        &mut self.to_server,
                        b'B',
                        &[portal, b"\0", &key, b"\0", rest],
                    );
                    self.current.retry = Some((retry, 1));
                } else {
                    self.out(b'P', &[b"\0", &parse]);
                    self.current.parses += 1;
                    if let Some((_, parses)) = &mut self.current.retry {
                        *parses += 1;
                    }
                    self.out(b'B', &[portal, b"\0\0", rest]);
                }
            }
            b'C' if body.first() == Some(&b'S') => {
                let (name, _) = cstr(&body[1..]);
                self.statements.remove(name);
                self.out(b'C', &[body]);
            }
            b'S' | b'Q' => {
                self.out(kind, &[body]);
                self.begun = false;
                self.exchanges.push_back(std::mem::take(&mut self.current));
            }
            _ => self.out(kind, &[body]),
        }
    }

    /// Moves every whole message the server sent into `to_client`, less
    /// the answers to added `Parse` and `Close` messages and a tried
    /// statement's refusal (whose retry it queues to the server). Answers
    /// whether the exchanges held back ([`Unnamed::rewrite_client`]) may
    /// go on.
    fn filter_server(&mut self) -> bool {
        let mut go_on = false;
        let mut at = 0;
        loop {
            let rest = &self.from_server[at..];
            let Some(len) = length(rest, 1) else { break };
            if rest.len() < 1 + len {
                break;
            }
            let message = &rest[..=len];
            at += 1 + len;
            let Some(current) = self.exchanges.front_mut() else {
                self.to_client.extend_from_slice(message);
                continue;
            };
            if current.refused {
                if message[0] == b'Z' {
                    let (retry, parses) = current.retry.take().unwrap_or_default();
                    *current = Exchange {
                        parses,
                        closes: 1,
                        ..Exchange::default()
                    };
                    self.to_server.extend_from_slice(&retry);
                    go_on = true;
                }
                continue;
            }
            // Notices, parameter changes and notifications may come at
            // any time: the answer begins with the first other message.
            let asynchronous = matches!(message[0], b'N' | b'S' | b'A');
            if !asynchronous
                && !std::mem::replace(&mut current.answered, true)
                && current.retry.is_some()
            {
                if message[0] == b'E' && retry_on(&message[5..]) {
                    current.refused = true;
                    continue;
                }
                current.retry = None;
                go_on = true;
            }
            match message[0] {
                b'1' if current.parses > 0 => {
                    current.parses -= 1;
                    continue;
                }
                b'3' if current.closes > 0 => {
                    current.closes -= 1;
                    continue;
                }
                // An error skips the rest of the exchange: no added
                // answer is still coming.
                b'E' => {
                    current.parses = 0;
                    current.closes = 0;
                }
                b'Z' => {
                    self.idle = message.get(5) == Some(&b'I');
                    self.exchanges.pop_front();
                }
                _ => {}
            }
            self.to_client.extend_from_slice(message);
        }
        self.from_server.drain(..at);
        go_on
    }
}

/// Whether an `ErrorResponse` (its body) to a tried statement asks for the
/// retry: the server connection has no statement under the key (`26000`),
/// or its cached plan can no longer answer the same columns (`0A000`, after
/// a schema change).
fn retry_on(body: &[u8]) -> bool {
    let mut rest = body;
    while let Some((&field, after)) = rest.split_first() {
        if field == 0 {
            break;
        }
        let (value, next) = cstr(after);
        if field == b'C' {
            return value == b"26000" || value == b"0A000";
        }
        rest = next;
    }
    false
}

/// The name a statement is kept under on the server: `fs_` and a 128-bit
/// hash of its `Parse` body after the name (text and parameter types), so
/// that any client's same statement finds it and no other does.
fn key(parse: &[u8]) -> Vec<u8> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let half = |salt: u8| {
        let mut hasher = DefaultHasher::new();
        salt.hash(&mut hasher);
        parse.hash(&mut hasher);
        hasher.finish()
    };
    format!("fs_{:016x}{:016x}", half(1), half(2)).into_bytes()
}

/// The big-endian length at `at` of `bytes` (it counts itself, so it is
/// never under 4: a smaller one is read as 4), if there.
fn length(bytes: &[u8], at: usize) -> Option<usize> {
    let raw: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
    usize::try_from(u32::from_be_bytes(raw))
        .ok()
        .map(|len| len.max(4))
}

/// A NUL-terminated string at the start of `bytes`, and what follows its
/// NUL.
fn cstr(bytes: &[u8]) -> (&[u8], &[u8]) {
    match bytes.iter().position(|&b| b == 0) {
        Some(end) => (&bytes[..end], &bytes[end + 1..]),
        None => (bytes, &[]),
    }
}

/// Appends a message of `kind` whose body is `parts` joined.
fn push(out: &mut Vec<u8>, kind: u8, parts: &[&[u8]]) {
    let len: usize = 4 + parts.iter().map(|part| part.len()).sum::<usize>();
    out.push(kind);
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    for part in parts {
        out.extend_from_slice(part);
    }
}

impl<S: AsyncWrite + Unpin> Unnamed<S> {
    /// Writes what `to_server` holds; `Pending` until all of it is written.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.to_server.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.to_server[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.to_server.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Unnamed<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_send(cx))?;
        this.from_client.extend_from_slice(buf);
        this.rewrite_client();
        // What is left is written on the next write or flush.
        if let Poll::Ready(Err(err)) = this.poll_send(cx) {
            return Poll::Ready(Err(err));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Unnamed<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.read < this.to_client.len() {
                let n = buf.remaining().min(this.to_client.len() - this.read);
                buf.put_slice(&this.to_client[this.read..this.read + n]);
                this.read += n;
                if this.read == this.to_client.len() {
                    this.to_client.clear();
                    this.read = 0;
                }
                return Poll::Ready(Ok(()));
            }
            // A retry, or exchanges held back behind a tried one: the
            // client writes nothing until it has its answer.
            if let Poll::Ready(Err(err)) = this.poll_send(cx) {
                return Poll::Ready(Err(err));
            }
            let mut chunk = [0u8; 8192];
            let mut raw = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut raw))?;
            if raw.filled().is_empty() {
                // The end of the stream: whatever half message is left is
                // the client's to find broken.
                let rest = std::mem::take(&mut this.from_server);
                this.to_client.extend_from_slice(&rest);
                if this.to_client.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            this.from_server.extend_from_slice(raw.filled());
            if this.filter_server() {
                this.rewrite_client();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: u8, parts: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        push(&mut out, kind, parts);
        out
    }

    fn started() -> Unnamed<()> {
        let mut wire = Unnamed::new(());
        wire.started = true;
        wire.exchanges.clear();
        wire
    }

    #[test]
    fn outside_a_transaction_the_server_s_kept_statement_is_tried_first() {
        let mut wire = started();
        wire.idle = true;
        let types = [0u8, 0];
        let parse = message(b'P', &[b"s7\0SELECT 1\0", &types]);
        let sync = message(b'S', &[]);
        wire.statements.insert(
            b"s7".to_vec(),
            Statement {
                parse: b"SELECT 1\0\0\0".to_vec(),
                key: key(b"SELECT 1\0\0\0"),
            },
        );
        let name = key(b"SELECT 1\0\0\0");
        assert!(name.starts_with(b"fs_") && name.len() == 35);
        assert_eq!(
            name,
            key(b"SELECT 1\0\0\0"),
            "the same statement, the same key"
        );
        assert_ne!(name, key(b"SELECT 2\0\0\0"));

        let bind_rest: &[u8] = &[0, 0, 0, 0, 0, 0];
        let bind = message(b'B', &[b"\0s7\0", bind_rest]);
        let execute = message(b'E', &[b"\0", &[0, 0, 0, 0]]);
        // A second exchange written behind the first waits for its answer.
        wire.from_client = [bind, execute.clone(), sync.clone(), parse, sync.clone()].concat();
        wire.rewrite_client();
        let tried = message(b'B', &[b"\0", &name, b"\0", bind_rest]);
        assert_eq!(
            wire.to_server,
            [tried, execute.clone(), sync.clone()].concat()
        );
        assert_eq!(wire.exchanges.len(), 1);
        assert!(!wire.from_client.is_empty(), "held back");

        // The server connection has no such statement: the refusal is taken
        // out and the retry closes, parses and binds it under the key.
        wire.to_server.clear();
        let ready = message(b'Z', &[b"I"]);
        let refusal = message(b'E', &[b"SERROR\0C26000\0Mno\0\0"]);
        wire.from_server = [refusal, ready.clone()].concat();
        assert!(wire.filter_server());
        assert!(wire.to_client.is_empty());
        assert_eq!(
            wire.to_server,
            [
                message(b'C', &[b"S", &name, b"\0"]),
                message(b'P', &[&name, b"\0", b"SELECT 1\0\0\0"]),
                message(b'B', &[b"\0", &name, b"\0", bind_rest]),
                execute,
                sync.clone()
            ]
            .concat()
        );
        // The held exchange goes on behind the retry.
        wire.rewrite_client();
        assert!(wire.from_client.is_empty());
        assert_eq!(wire.exchanges.len(), 2);

        let answer = [
            message(b'3', &[]),
            message(b'1', &[]),
            message(b'2', &[]),
            message(b'C', &[b"SELECT 1\0"]),
            ready.clone(),
        ]
        .concat();
        wire.from_server = answer;
        wire.filter_server();
        assert_eq!(
            wire.to_client,
            [message(b'2', &[]), message(b'C', &[b"SELECT 1\0"]), ready].concat()
        );
        assert_eq!(wire.exchanges.len(), 1);
    }

    #[test]
    fn inside_a_transaction_every_bind_carries_its_parse() {
        let mut wire = started();
        wire.idle = false;
        wire.statements.insert(
            b"s7".to_vec(),
            Statement {
                parse: b"SELECT 1\0\0\0".to_vec(),
                key: key(b"SELECT 1\0\0\0"),
            },
        );
        wire.from_client = [message(b'B', &[b"\0s7\0\0\0\0\0\0\0"]), message(b'S', &[])].concat();
        wire.rewrite_client();
        assert_eq!(
            wire.to_server,
            [
                message(b'P', &[b"\0SELECT 1\0\0\0"]),
                message(b'B', &[b"\0\0\0\0\0\0\0\0"]),
                message(b'S', &[])
            ]
            .concat()
        );
        assert!(wire.exchanges[0].retry.is_none());
    }

    #[test]
    fn a_named_statement_never_reaches_the_server() {
        let mut wire = started();
        let types = [0u8, 1, 0, 0, 0, 20];
        let parse = message(b'P', &[b"s7\0SELECT $1\0", &types]);
        let describe = message(b'D', &[b"Ss7\0"]);
        let sync = message(b'S', &[]);
        wire.from_client = [parse, describe, sync.clone()].concat();
        wire.rewrite_client();
        assert_eq!(
            wire.to_server,
            [
                message(b'P', &[b"\0SELECT $1\0", &types]),
                message(b'D', &[b"S\0"]),
                sync.clone()
            ]
            .concat()
        );
        assert_eq!(wire.exchanges, [Exchange::default()]);

        wire.to_server.clear();
        let bind_rest: &[u8] = &[0, 0, 0, 1, 0, 0, 0, 1, b'7', 0, 0];
        let bind = message(b'B', &[b"\0s7\0", bind_rest]);
        let execute = message(b'E', &[b"\0", &[0, 0, 0, 0]]);
        // Split mid-message: the rewrite waits for whole messages.
        let all = [bind, execute.clone(), sync.clone()].concat();
        wire.from_client = all[..7].to_vec();
        wire.rewrite_client();
        assert!(wire.to_server.is_empty());
        wire.from_client.extend_from_slice(&all[7..]);
        wire.rewrite_client();
        assert_eq!(
            wire.to_server,
            [
                message(b'P', &[b"\0SELECT $1\0", &types]),
                message(b'B', &[b"\0\0", bind_rest]),
                execute,
                sync
            ]
            .concat()
        );
        assert_eq!(
            wire.exchanges,
            [
                Exchange::default(),
                Exchange {
                    parses: 1,
                    ..Exchange::default()
                }
            ]
        );

        // The answer: the first exchange's answer whole, the second's less
        // the added ParseComplete.
        let ready = message(b'Z', &[b"I"]);
        let first = [
            message(b'1', &[]),
            message(b't', &[&[0, 0]]),
            message(b'n', &[]),
            ready.clone(),
        ]
        .concat();
        let second = [
            message(b'1', &[]),
            message(b'2', &[]),
            message(b'C', &[b"SELECT 1\0"]),
            ready.clone(),
        ]
        .concat();
        wire.from_server = [first.clone(), second].concat();
        wire.filter_server();
        assert_eq!(
            wire.to_client,
            [
                first,
                message(b'2', &[]),
                message(b'C', &[b"SELECT 1\0"]),
                ready
            ]
            .concat()
        );
        assert!(wire.exchanges.is_empty());

        let close = message(b'C', &[b"Ss7\0"]);
        wire.to_server.clear();
        wire.from_client = close.clone();
        wire.rewrite_client();
        assert_eq!(wire.to_server, close, "a close passes unchanged");
        assert!(wire.statements.is_empty(), "and forgets the text");
    }

    #[test]
    fn an_error_in_an_exchange_with_an_added_parse_keeps_the_count() {
        let mut wire = started();
        let one = || Exchange {
            parses: 1,
            ..Exchange::default()
        };
        wire.exchanges = VecDeque::from([one(), one()]);
        let error = message(b'E', &[b"SERROR\0\0"]);
        let ready = message(b'Z', &[b"I"]);
        let ok = [message(b'1', &[]), message(b'2', &[]), ready.clone()].concat();
        wire.from_server = [error.clone(), ready.clone(), ok].concat();
        wire.filter_server();
        assert_eq!(
            wire.to_client,
            [error, ready.clone(), message(b'2', &[]), ready].concat()
        );
    }
}
