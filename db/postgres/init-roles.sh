#!/bin/sh
# Least-privilege roles of the service database (README, "Security"). Run once by the
# postgres image on an empty data directory (/docker-entrypoint-initdb.d), as its superuser:
#   tuner_migrate  owns the database and its schema: `tuner db upgrade` (the compose `migrate`
#                  service) creates and alters the tables as this role;
#   tuner_service  may read and write rows, nothing else (no DDL, no other database): the
#                  scheduler, the workers and the dashboard connect as this role.
# Variables: POSTGRES_USER, POSTGRES_DB (the image's), TUNER_MIGRATE_PASSWORD,
# TUNER_SERVICE_PASSWORD.
set -eu
psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v db="$POSTGRES_DB" -v migrate_pw="$TUNER_MIGRATE_PASSWORD" \
    -v service_pw="$TUNER_SERVICE_PASSWORD" <<'SQL'
CREATE ROLE tuner_migrate LOGIN PASSWORD :'migrate_pw';
CREATE ROLE tuner_service LOGIN PASSWORD :'service_pw';
ALTER DATABASE :"db" OWNER TO tuner_migrate;
ALTER SCHEMA public OWNER TO tuner_migrate;
REVOKE ALL ON DATABASE :"db" FROM PUBLIC;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT CONNECT ON DATABASE :"db" TO tuner_service;
GRANT USAGE ON SCHEMA public TO tuner_service;
ALTER DEFAULT PRIVILEGES FOR ROLE tuner_migrate IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO tuner_service;
ALTER DEFAULT PRIVILEGES FOR ROLE tuner_migrate IN SCHEMA public
    GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO tuner_service;
SQL
