"""grep's ``type`` filter: language names as ripgrep knows them, mapped to file-name globs.

A name matches the file's base name (``*.py``, ``Makefile``); the table keeps ripgrep's
type names for the common languages, so a model used to ``rg -t py`` or ``--type ts``
passes the same word. Unknown names fail with the list of known ones.
"""

TYPES = {
    "c": "*.{c,h}",
    "cpp": "*.{cpp,cc,cxx,c++,hpp,hh,hxx,h++,h,inl}",
    "cs": "*.{cs,csx}",
    "css": "*.{css,scss,sass,less}",
    "dart": "*.dart",
    "docker": "{Dockerfile,Dockerfile.*,*.dockerfile,Containerfile}",
    "elixir": "*.{ex,exs,eex,heex}",
    "erlang": "*.{erl,hrl}",
    "go": "*.go",
    "haskell": "*.{hs,lhs}",
    "html": "*.{html,htm,xhtml}",
    "java": "*.java",
    "js": "*.{js,mjs,cjs,jsx}",
    "json": "*.{json,jsonc,json5}",
    "kotlin": "*.{kt,kts}",
    "lua": "*.lua",
    "make": "{Makefile,makefile,GNUmakefile,*.mk,*.mak}",
    "markdown": "*.{md,markdown,mdx}",
    "md": "*.{md,markdown,mdx}",
    "nix": "*.nix",
    "ocaml": "*.{ml,mli,mll,mly}",
    "php": "*.{php,phtml}",
    "proto": "*.proto",
    "py": "*.{py,pyi,pyw}",
    "python": "*.{py,pyi,pyw}",
    "r": "*.{r,R,Rmd}",
    "rst": "*.rst",
    "ruby": "{*.rb,*.rake,*.gemspec,Gemfile,Rakefile}",
    "rb": "{*.rb,*.rake,*.gemspec,Gemfile,Rakefile}",
    "rust": "*.rs",
    "scala": "*.{scala,sc,sbt}",
    "sh": "{*.sh,*.bash,*.zsh,*.ksh,.bashrc,.zshrc,.profile}",
    "sql": "*.sql",
    "svelte": "*.svelte",
    "swift": "*.swift",
    "tf": "*.{tf,tfvars}",
    "toml": "{*.toml,Cargo.lock}",
    "ts": "*.{ts,tsx,mts,cts}",
    "tsx": "*.tsx",
    "txt": "*.txt",
    "vue": "*.vue",
    "xml": "*.{xml,xsd,xsl,xslt,svg}",
    "yaml": "*.{yaml,yml}",
    "zig": "*.zig",
}


class UnknownType(ValueError):
    pass


def glob_for(name):
    """The base-name glob of a type name (case-insensitive), or UnknownType."""
    found = TYPES.get(name.strip().lower().lstrip("."))
    if found is None:
        raise UnknownType(f"unknown file type {name!r}; known types: {', '.join(sorted(TYPES))}. "
                          "Or use include with a glob such as *.ext.")
    return found
