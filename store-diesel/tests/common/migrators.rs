//! Many processes, one migration: migrators started together on a fresh
//! database all succeed and apply each migration once, and a migrator
//! that finds the schema newer than itself refuses, naming both versions.
//! Written once, called by each dialect's `migrations.rs`.

use flowstate_store_diesel::{Dialect, DieselStore, Error, StoreConfig, migrate};

use super::db::{TestDb, migration_versions};

/// How many migrators start together.
pub const MIGRATORS: usize = 4;

/// How many rows `__diesel_schema_migrations` has, and how many versions.
async fn recorded(db: &TestDb) -> (i64, i64) {
    let rows = db
        .count("SELECT COUNT(*) AS n FROM __diesel_schema_migrations")
        .await;
    let versions = db
        .count("SELECT COUNT(DISTINCT version) AS n FROM __diesel_schema_migrations")
        .await;
    (rows, versions)
}

/// [`MIGRATORS`] `migrate::up` at once on a fresh database: every one
/// succeeds, between them they apply each version once (one applies
/// everything, the others find nothing left), and the table of applied
/// versions has each once. Then the same with `DieselStore::open_migrated`.
/// Answers how long the `up`s took, for the report.
pub async fn migrators_started_together_apply_the_schema_once(
    dialect: Dialect,
) -> std::time::Duration {
    let versions = migration_versions(dialect);
    let db = TestDb::empty(dialect).await;
    let started = std::time::Instant::now();
    let ups = futures_util::future::join_all((0..MIGRATORS).map(|_| migrate::up(&db.url))).await;
    let took = started.elapsed();
    let mut applied: Vec<String> = Vec::new();
    for (i, up) in ups.into_iter().enumerate() {
        match up {
            Ok(versions) => applied.extend(versions),
            Err(err) => panic!("migrator {i} of {MIGRATORS} failed: {err:?}"),
        }
    }
    applied.sort();
    assert_eq!(
        applied, versions,
        "each version applied by exactly one migrator"
    );
    let n = i64::try_from(versions.len()).unwrap();
    assert_eq!(recorded(&db).await, (n, n));
    assert!(
        migrate::status(&db.url)
            .await
            .unwrap()
            .iter()
            .all(|m| m.applied)
    );
    db.drop_database().await;

    let db = TestDb::empty(dialect).await;
    let opens = futures_util::future::join_all(
        (0..MIGRATORS)
            .map(|_| DieselStore::open_migrated(&db.url, StoreConfig::default().pool_size(1))),
    )
    .await;
    for (i, open) in opens.into_iter().enumerate() {
        if let Err(err) = open {
            panic!("open_migrated {i} of {MIGRATORS} failed: {err:?}");
        }
    }
    assert_eq!(recorded(&db).await, (n, n));
    db.drop_database().await;
    took
}

/// A migrator that finds a version it does not know applied refuses with
/// [`Error::SchemaAhead`], naming the database's newest version and its
/// own, and applies nothing (so it cannot write to a schema it was not
/// written for), even with a migration of its own pending.
pub async fn a_migrator_older_than_the_schema_refuses(dialect: Dialect) {
    let versions = migration_versions(dialect);
    let newest = versions.last().cloned().unwrap();
    let db = TestDb::migrated(dialect).await;
    migrate::down(&db.url, 1).await.unwrap();
    db.execute("INSERT INTO __diesel_schema_migrations (version) VALUES ('29991231000000')")
        .await;
    let err = migrate::up(&db.url).await.expect_err("a schema ahead");
    let Error::SchemaAhead {
        unknown,
        newest_applied,
        newest_known,
        ..
    } = &err
    else {
        panic!("expected SchemaAhead, got {err:?}");
    };
    assert_eq!(unknown, &["29991231000000"]);
    assert_eq!(newest_applied, "29991231000000");
    assert_eq!(*newest_known, newest);
    let message = err.to_string();
    assert!(
        message.contains("29991231000000") && message.contains(&newest),
        "{message}"
    );
    let status = migrate::status(&db.url).await.unwrap();
    assert!(
        !status.last().unwrap().applied,
        "the pending migration stayed pending"
    );
    let err = DieselStore::open_migrated(&db.url, StoreConfig::default())
        .await
        .expect_err("open_migrated refuses too");
    assert!(matches!(err, Error::SchemaAhead { .. }), "{err:?}");
    db.drop_database().await;
}
