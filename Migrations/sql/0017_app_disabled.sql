-- Switching a tenant off (API.md, "Tenants share one server safely"): a disabled app answers no
-- request of its own and its outbox items wait. NULL: the app is enabled. Set and cleared only
-- by the platform operator (`POST /v1/admin/apps/{id}/disable` and `/enable`, `gatehouse apps
-- disable|enable`), never by settings or a Tenants file; every change bumps `apps.version`, so
-- each node's app cache sees it within its refresh interval.
ALTER TABLE apps ADD COLUMN disabled_at BIGINT;
