-- Migration 5 is another change's (branch wA). This placeholder keeps the
-- migrations numbered 1..n on this branch until that one is merged; the
-- merge replaces it with the real 005 and deletes this file.
SELECT 1;
