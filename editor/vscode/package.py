#!/usr/bin/env python3
"""Packages the dtf VS Code extension as a .vsix, offline and with only the standard library.

A .vsix is a zip (Open Packaging Conventions) holding [Content_Types].xml,
extension.vsixmanifest and the extension's files under extension/. This writes the
same layout `vsce package` does for an extension without code, so that
`code --install-extension dtf-0.1.0.vsix` works on a machine that cannot reach npm.

usage: package.py OUTPUT.vsix
"""

import json
import sys
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

HERE = Path(__file__).resolve().parent

# Files shipped under extension/, relative to this folder. JSON ones are parsed first so
# that a broken grammar or manifest fails here rather than in the editor.
FILES = [
    "package.json",
    "README.md",
    "language-configuration.json",
    "syntaxes/dtf.tmLanguage.json",
    "snippets/dtf.json",
]

CONTENT_TYPES = {
    ".json": "application/json",
    ".md": "text/markdown",
    ".vsixmanifest": "text/xml",
}

# A fixed timestamp keeps the archive byte-for-byte reproducible.
ZIP_TIME = (2024, 1, 1, 0, 0, 0)


def content_types_xml(names):
    extensions = sorted({Path(n).suffix for n in names} | {".vsixmanifest"})
    lines = ['<?xml version="1.0" encoding="utf-8"?>',
             '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">']
    for ext in extensions:
        ctype = CONTENT_TYPES.get(ext, "application/octet-stream")
        lines.append('  <Default Extension=%s ContentType=%s/>' % (quoteattr(ext), quoteattr(ctype)))
    lines.append("</Types>")
    return "\n".join(lines) + "\n"


def vsixmanifest_xml(pkg):
    name, publisher, version = pkg["name"], pkg["publisher"], pkg["version"]
    tags = ",".join(pkg.get("keywords", []) + ["__ext_dtf"])
    categories = ",".join(pkg.get("categories", []))
    return f"""<?xml version="1.0" encoding="utf-8"?>
<PackageManifest Version="2.0.0" xmlns="http://schemas.microsoft.com/developer/vsx-schema/2011" xmlns:d="http://schemas.microsoft.com/developer/vsx-schema-design/2011">
  <Metadata>
    <Identity Language="en-US" Id={quoteattr(name)} Version={quoteattr(version)} Publisher={quoteattr(publisher)}/>
    <DisplayName>{escape(pkg.get("displayName", name))}</DisplayName>
    <Description xml:space="preserve">{escape(pkg.get("description", ""))}</Description>
    <Tags>{escape(tags)}</Tags>
    <Categories>{escape(categories)}</Categories>
    <GalleryFlags>Public</GalleryFlags>
    <Properties>
      <Property Id="Microsoft.VisualStudio.Code.Engine" Value={quoteattr(pkg["engines"]["vscode"])}/>
      <Property Id="Microsoft.VisualStudio.Code.ExtensionDependencies" Value=""/>
      <Property Id="Microsoft.VisualStudio.Code.ExtensionPack" Value=""/>
      <Property Id="Microsoft.VisualStudio.Code.ExtensionKind" Value="workspace"/>
    </Properties>
  </Metadata>
  <Installation>
    <InstallationTarget Id="Microsoft.VisualStudio.Code"/>
  </Installation>
  <Dependencies/>
  <Assets>
    <Asset Type="Microsoft.VisualStudio.Code.Manifest" Path="extension/package.json" Addressable="true"/>
    <Asset Type="Microsoft.VisualStudio.Services.Content.Details" Path="extension/README.md" Addressable="true"/>
  </Assets>
</PackageManifest>
"""


def add(zf, name, data):
    info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data)


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        print("usage: package.py OUTPUT.vsix", file=sys.stderr)
        return 2
    out = Path(argv[1])

    contents = {}
    for rel in FILES:
        path = HERE / rel
        if not path.is_file():
            print(f"package.py: error: {path} is missing", file=sys.stderr)
            return 1
        data = path.read_bytes()
        if rel.endswith(".json"):
            try:
                json.loads(data)
            except ValueError as e:
                print(f"package.py: error: {path}: not valid JSON: {e}", file=sys.stderr)
                return 1
        contents[rel] = data

    pkg = json.loads(contents["package.json"])
    for key in ("name", "publisher", "version"):
        if not pkg.get(key):
            print(f"package.py: error: package.json has no {key!r}", file=sys.stderr)
            return 1
    if "vscode" not in pkg.get("engines", {}):
        print("package.py: error: package.json has no engines.vscode", file=sys.stderr)
        return 1

    names = ["extension/" + rel for rel in FILES]
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w") as zf:
        add(zf, "[Content_Types].xml", content_types_xml(names))
        add(zf, "extension.vsixmanifest", vsixmanifest_xml(pkg))
        for rel in FILES:
            add(zf, "extension/" + rel, contents[rel])
    print(f"wrote {out} ({pkg['publisher']}.{pkg['name']} {pkg['version']}, {len(FILES)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
