"""Extractors for office formats, one module per format (PDF, Word, spreadsheets,
slides, HTML, caption transcripts). Each parsing library is imported only inside
its own module, and only when a file of that type is extracted."""
