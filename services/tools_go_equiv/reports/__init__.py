"""Reports: Markdown sources rendered to .docx and .pdf, files kept in the object store."""
