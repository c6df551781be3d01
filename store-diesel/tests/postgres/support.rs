//! What the PostgreSQL tests share: a fresh database per test on the server
//! `FLOWSTATE_PG_URL` names, migrated, and a store on it.

use std::sync::Arc;

use diesel_async::{AsyncConnection, AsyncPgConnection, SimpleAsyncConnection};
use flowstate_store_diesel::postgres::PgStore;
use flowstate_store_diesel::{StatementLog, StoreConfig};

/// The server the tests use, without a database name.
pub fn server_url() -> String {
    let url = std::env::var("FLOWSTATE_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    match url[scheme_end..].find('/') {
        Some(slash) => url[..scheme_end + slash].to_owned(),
        None => url,
    }
}

/// The URL of database `name` on the test server.
pub fn database_url(name: &str) -> String {
    format!("{}/{name}", server_url())
}

/// An admin connection to the server's `postgres` database; panics with a
/// clear message if the server cannot be reached (tests never skip).
pub async fn admin() -> AsyncPgConnection {
    let url = database_url("postgres");
    AsyncPgConnection::establish(&url).await.unwrap_or_else(|err| {
        panic!("cannot reach PostgreSQL at {url} (set FLOWSTATE_PG_URL to a server the tests may create databases on): {err}")
    })
}

/// A fresh, empty database `fst_<32 hex>`; answers its URL.
pub async fn fresh_database() -> String {
    let name = format!("fst_{}", uuid::Uuid::now_v7().simple());
    admin()
        .await
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap_or_else(|err| panic!("cannot create database {name}: {err}"));
    database_url(&name)
}

/// Drops the database at `url` (best effort: CI drops every `fst_%` first).
pub async fn drop_database(url: &str) {
    let name = url.rsplit('/').next().expect("a database url");
    let _ = admin()
        .await
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await;
}

/// A fresh migrated database: its URL.
pub async fn migrated_database() -> String {
    let url = fresh_database().await;
    let applied = flowstate_store_diesel::migrate::up(&url)
        .await
        .expect("migrate up");
    assert_eq!(
        applied.len(),
        1,
        "a fresh database gets the one initial migration"
    );
    url
}

/// A store on a fresh migrated database, with `config`; answers its URL too.
pub async fn store_with(config: StoreConfig) -> (PgStore, String) {
    let url = migrated_database().await;
    let store = PgStore::connect(&url, config).await.expect("connect");
    (store, url)
}

/// A store on a fresh migrated database recording every statement in the
/// log it answers.
pub async fn logged_store() -> (PgStore, Arc<StatementLog>, String) {
    let log = StatementLog::new();
    let (store, url) = store_with(StoreConfig::default().statement_log(log.clone())).await;
    (store, log, url)
}
