-- A placeholder: version 12 belongs to the account-deletion branch, merged separately. The
-- migrator refuses a gap in the versions, so this branch needs a 0012 to run its 0013. When the
-- branches meet, this file goes and the real 0012 takes its place (no released build has it).
SELECT 1;
