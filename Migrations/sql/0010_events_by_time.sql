-- The retention job deletes every app's oldest events: by time alone.
CREATE INDEX events_created ON events (created_at);
