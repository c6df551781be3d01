//! Opening a store on a schema it was not written for: a database never
//! migrated, one missing the newest migration, and one migrated by a newer
//! flowstate each fail at open with a typed error that says what to do.

use flowstate_store_diesel::{Dialect, DieselStore, Error, StoreConfig, migrate};

use super::db::TestDb;

/// The three cases on a fresh `dialect` database.
pub async fn open_refuses_a_schema_it_was_not_written_for(dialect: Dialect) {
    let db = TestDb::empty(dialect).await;
    let open = || DieselStore::open(&db.url, StoreConfig::default());

    let err = open().await.expect_err("an unmigrated database");
    let Error::NotMigrated { pending, .. } = &err else {
        panic!("expected NotMigrated, got {err:?}");
    };
    assert_eq!(*pending, super::db::migration_versions(dialect));
    assert!(err.to_string().contains("cargo xtask migrate up"), "{err}");

    migrate::up(&db.url).await.unwrap();
    migrate::down(&db.url, 1).await.unwrap();
    let newest = super::db::migration_versions(dialect).pop().unwrap();
    match open().await {
        Err(Error::NotMigrated { pending, .. }) => assert_eq!(pending, [newest]),
        other => panic!("expected NotMigrated, got {other:?}"),
    }

    migrate::up(&db.url).await.unwrap();
    drop(open().await.expect("a migrated database opens"));
    db.execute("INSERT INTO __diesel_schema_migrations (version) VALUES ('29991231000000')")
        .await;
    match open().await {
        Err(Error::SchemaAhead { unknown, .. }) => assert_eq!(unknown, ["29991231000000"]),
        other => panic!("expected SchemaAhead, got {other:?}"),
    }
    db.drop_database().await;
}
