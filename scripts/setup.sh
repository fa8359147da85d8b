#!/usr/bin/env bash
# Installs the prerequisites, builds and installs the extension, starts a local PostgreSQL 15
# cluster, creates the extension in database simhash_demo and runs the quick-start demo.
# Debian bookworm, as root. Safe to run again.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
install_prerequisites
install_extension
start_cluster
fresh_database simhash_demo
log "demo (database simhash_demo; connect with: psql -h $PGHOST -p $PGPORT -U postgres simhash_demo)"
cd "$REPO_ROOT" && psql -X -d simhash_demo -f scripts/demo.sql
