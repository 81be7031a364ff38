#!/bin/sh
# The postgres image runs this once, as its superuser, when it creates an empty data directory
# (deploy/compose.yaml mounts it in /docker-entrypoint-initdb.d). The ledgers' role, `paypipe`,
# owns the paypipe database and nothing more: no superuser, no CREATEDB, no CREATEROLE, no
# replication. A ledger (or whoever holds its store-url) can then change paypipe's own tables,
# but not the server, other databases or other roles.
set -eu
password=$(cat "${PAYPIPE_DB_PASSWORD_FILE:?names the paypipe role password file}")
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres --set=password="$password" <<'SQL'
CREATE ROLE paypipe LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD :'password';
CREATE DATABASE paypipe OWNER paypipe;
SQL
