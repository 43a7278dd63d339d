#!/bin/sh
# Regenerates visitor-service/languages/visitor-service.pot from the plugin's PHP with GNU
# xgettext (Debian's gettext; wp-cli's `wp i18n make-pot` is not packaged here). Run it after
# changing a translatable string; tests/wordpress/test_review_rules.py checks the file is current.
set -eu
cd "$(dirname "$0")/visitor-service"
mkdir -p languages
find . -name '*.php' | LC_ALL=C sort | xgettext --files-from=- --language=PHP --from-code=UTF-8 \
    --add-comments=translators: --sort-by-file --no-wrap \
    --keyword=__ --keyword=_e --keyword=_n:1,2 --keyword=_x:1,2c --keyword=_ex:1,2c \
    --keyword=_nx:1,2,4c --keyword=esc_html__ --keyword=esc_html_e --keyword=esc_attr__ \
    --keyword=esc_attr_e --keyword=esc_html_x:1,2c --keyword=esc_attr_x:1,2c \
    --package-name="Visitor Service" \
    --package-version="$(sed -n "s/^ \* Version: *//p" visitor-service.php)" \
    --copyright-holder="Visitor Service" \
    --msgid-bugs-address="https://service.example/support" \
    --output=languages/visitor-service.pot
# The header's placeholders, as WordPress's own templates have them.
sed -i 's/^"Content-Type: text\/plain; charset=CHARSET\\n"$/"Content-Type: text\/plain; charset=UTF-8\\n"/' \
    languages/visitor-service.pot
