//! [`DefinitionStore`] for [`DieselStore`]: workflows once per (app, scope,
//! name), versions once per (workflow, hash), publishing that makes a
//! version active, and activations; cold paths, in the diesel DSL once for
//! every dialect.
//!
//! Idempotent creates insert and ignore a taken key, then read the holder
//! in a statement of their own (as `upsert_version` does): whether the row
//! is this call's is told by its id, on every dialect.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;

use flowstate_core::limits::checked;
use flowstate_core::ports::DefinitionStore;
use flowstate_core::ports::checks;
use flowstate_core::{
    Activation, ActivationId, Error, Inserted, NewActivation, NewPublishedVersion, NewWorkflow,
    PublishedVersion, PublishedVersionId, Result, Workflow, WorkflowId,
};

use crate::backend::{in_transaction, on_connection};
use crate::error::TxError;
use crate::error::is_foreign_key_violation;
use crate::rows::convert;
use crate::rows::events::{ActivationRow, PublishedVersionRow, WorkflowRow};
use crate::schema::{
    JsonText, flowstate_activations as activations, flowstate_published_versions as versions,
    flowstate_workflows as workflows,
};
use crate::store::DieselStore;

impl DieselStore {
    /// The workflow row `id`, if any.
    async fn workflow_row(&self, op: &'static str, id: &str) -> Result<Option<WorkflowRow>> {
        on_connection!(self, op, |conn| workflows::table
            .find(id)
            .select(WorkflowRow::as_select())
            .first(conn)
            .await
            .optional())
    }

    /// The activation row `id`, if any.
    async fn activation_row(&self, op: &'static str, id: &str) -> Result<Option<ActivationRow>> {
        on_connection!(self, op, |conn| activations::table
            .find(id)
            .select(ActivationRow::as_select())
            .first(conn)
            .await
            .optional())
    }
}

impl DefinitionStore for DieselStore {
    #[tracing::instrument(level = "debug", skip_all, fields(name = %workflow.name))]
    async fn create_workflow(&self, workflow: NewWorkflow) -> Result<Inserted<Workflow>> {
        let op = "create_workflow";
        checks::create_workflow(&self.config.limits, &workflow)?;
        let row = WorkflowRow {
            id: WorkflowId::generate().to_string(),
            app_id: workflow.app_id,
            scope_id: workflow.scope_id,
            name: workflow.name,
            enabled: true,
            active_version_id: None,
            created_at: self.now(),
        };
        // No foreign key on this table, so MySQL's `INSERT IGNORE` hides
        // nothing but the taken key.
        on_connection!(self, op, |conn| diesel::insert_into(workflows::table)
            .values(&row)
            .on_conflict_do_nothing()
            .execute(conn)
            .await)?;
        let holder: WorkflowRow = on_connection!(self, op, |conn| workflows::table
            .filter(workflows::app_id.eq(&row.app_id))
            .filter(workflows::scope_id.eq(&row.scope_id))
            .filter(workflows::name.eq(&row.name))
            .select(WorkflowRow::as_select())
            .first(conn)
            .await)?;
        let inserted = holder.id == row.id;
        Ok(Inserted {
            record: Workflow::try_from(holder)?,
            inserted,
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(workflow = %id))]
    async fn get_workflow(&self, id: WorkflowId) -> Result<Workflow> {
        self.workflow_row("get_workflow", &id.to_string())
            .await?
            .map_or(Err(Error::WorkflowNotFound(id)), Workflow::try_from)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_workflows(&self, app_id: &str, scope_id: &str) -> Result<Vec<Workflow>> {
        checks::list_workflows(&self.config.limits, app_id, scope_id)?;
        let rows: Vec<WorkflowRow> = on_connection!(self, "list_workflows", |conn| {
            workflows::table
                .filter(workflows::app_id.eq(app_id))
                .filter(workflows::scope_id.eq(scope_id))
                .order(workflows::name)
                .select(WorkflowRow::as_select())
                .load(conn)
                .await
        })?;
        convert(rows)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(workflow = %id, enabled))]
    async fn set_workflow_enabled(&self, id: WorkflowId, enabled: bool) -> Result<Workflow> {
        let op = "set_workflow_enabled";
        let id_text = id.to_string();
        on_connection!(self, op, |conn| diesel::update(
            workflows::table.find(&id_text)
        )
        .set(workflows::enabled.eq(enabled))
        .execute(conn)
        .await)?;
        self.workflow_row(op, &id_text)
            .await?
            .map_or(Err(Error::WorkflowNotFound(id)), Workflow::try_from)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(workflow = %version.workflow))]
    async fn publish_version(
        &self,
        version: NewPublishedVersion,
    ) -> Result<Inserted<PublishedVersion>> {
        let (version, definition) =
            checked(version, |v| checks::publish_version(&self.config.limits, v))?;
        let workflow = version.workflow;
        let row = PublishedVersionRow {
            id: PublishedVersionId::generate().to_string(),
            workflow_id: workflow.to_string(),
            hash: version.hash,
            definition: JsonText(definition),
            created_at: self.now(),
        };
        let holder = in_transaction!(self, "publish_version", |conn| {
            // MySQL's `INSERT IGNORE` turns a missing workflow into a
            // warning; then no holder is found, which says the same.
            match diesel::insert_into(versions::table)
                .values(&row)
                .on_conflict_do_nothing()
                .execute(conn)
                .await
            {
                Err(err) if is_foreign_key_violation(&err) => {
                    return Err(TxError::Port(Error::WorkflowNotFound(workflow)));
                }
                other => other?,
            };
            let holder: Option<PublishedVersionRow> = versions::table
                .filter(versions::workflow_id.eq(&row.workflow_id))
                .filter(versions::hash.eq(&row.hash))
                .select(PublishedVersionRow::as_select())
                .first(conn)
                .await
                .optional()?;
            let Some(holder) = holder else {
                return Err(TxError::Port(Error::WorkflowNotFound(workflow)));
            };
            diesel::update(workflows::table.find(&row.workflow_id))
                .set(workflows::active_version_id.eq(Some(&holder.id)))
                .execute(conn)
                .await?;
            Ok(holder)
        })?;
        let inserted = holder.id == row.id;
        Ok(Inserted {
            record: PublishedVersion::try_from(holder)?,
            inserted,
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(workflow = %workflow))]
    async fn list_versions(&self, workflow: WorkflowId) -> Result<Vec<PublishedVersion>> {
        let id_text = workflow.to_string();
        let rows: Vec<PublishedVersionRow> = on_connection!(self, "list_versions", |conn| {
            versions::table
                .filter(versions::workflow_id.eq(&id_text))
                .order((versions::created_at, versions::id))
                .select(PublishedVersionRow::as_select())
                .load(conn)
                .await
        })?;
        convert(rows)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(workflow = %activation.workflow))]
    async fn create_activation(&self, activation: NewActivation) -> Result<Activation> {
        let op = "create_activation";
        let (activation, authorization) = checked(activation, |a| {
            checks::create_activation(&self.config.limits, a)
        })?;
        let row = ActivationRow {
            id: ActivationId::generate().to_string(),
            workflow_id: activation.workflow.to_string(),
            version_id: activation.version.to_string(),
            event_type: activation.event_type,
            enabled: true,
            authorization_snapshot: JsonText(authorization),
            created_at: self.now(),
        };
        let owned: i64 = on_connection!(self, op, |conn| versions::table
            .filter(versions::id.eq(&row.version_id))
            .filter(versions::workflow_id.eq(&row.workflow_id))
            .count()
            .get_result(conn)
            .await)?;
        if owned == 0 {
            self.get_workflow(activation.workflow).await?;
            return Err(Error::PublishedVersionNotFound {
                workflow: activation.workflow,
                version: activation.version,
            });
        }
        on_connection!(self, op, |conn| diesel::insert_into(activations::table)
            .values(&row)
            .execute(conn)
            .await)?;
        Activation::try_from(row)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(activation = %id, enabled))]
    async fn set_activation_enabled(&self, id: ActivationId, enabled: bool) -> Result<Activation> {
        let op = "set_activation_enabled";
        let id_text = id.to_string();
        on_connection!(self, op, |conn| diesel::update(
            activations::table.find(&id_text)
        )
        .set(activations::enabled.eq(enabled))
        .execute(conn)
        .await)?;
        self.activation_row(op, &id_text)
            .await?
            .map_or(Err(Error::ActivationNotFound(id)), Activation::try_from)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(workflow = %workflow))]
    async fn list_activations(&self, workflow: WorkflowId) -> Result<Vec<Activation>> {
        let id_text = workflow.to_string();
        let rows: Vec<ActivationRow> = on_connection!(self, "list_activations", |conn| {
            activations::table
                .filter(activations::workflow_id.eq(&id_text))
                .order((activations::created_at, activations::id))
                .select(ActivationRow::as_select())
                .load(conn)
                .await
        })?;
        convert(rows)
    }
}
