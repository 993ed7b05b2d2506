-- The web flow of every provider (API.md "More providers", 2026-12-05): a flow and the login
-- code it ends in name their provider, `apple` or the id of one of the app's `oidc_providers`.
-- A flow is taken only at its own provider's callback; a login code's provider is the `method`
-- of the session it opens (its events and metrics).
ALTER TABLE web_flows ADD COLUMN provider TEXT NOT NULL DEFAULT 'apple';
ALTER TABLE login_codes ADD COLUMN provider TEXT NOT NULL DEFAULT 'apple';
-- The PKCE verifier of the authorization request to the provider (RFC 7636), where the provider
-- takes one: the provider redeems the flow's code with it only.
ALTER TABLE web_flows ADD COLUMN provider_verifier TEXT;
