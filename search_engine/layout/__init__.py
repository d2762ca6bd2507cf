"""A page's structure (`search_engine.page_layout.PageLayout`) from a PDF's text layer or from OCR.

Two readers turn a page into the same parts (`parts`: pieces, lines and blocks of text, tables, figures, in
page units), and one composer (`compose`) types them into regions in reading order, boxes in page-image pixels:

- `pdf`: born-digital PDF pages, read from their text layer (`text_layer`), with ruled and aligned tables
  (`tables`), figures and their labels (`figures`), captions (`captions`) and the running headers and footers
  the document repeats (`margins`);
- `ocr`: scans, slides and photos, read from one Tesseract pass, with the same table finder by alignment.

`search_texts` says what search scores each region by. Box arithmetic is `geometry`.

Why by hand: PyMuPDF and Tesseract give the raw blocks, lines and ruled tables (used here), but no library here
turns them into typed regions (heading / caption / figure with its labels / running header) with one box
convention for both sources; pdfplumber was not measured (PyMuPDF is already a dependency and its text layer is
exact; pdfplumber's table finder is the one PyMuPDF's ports).
"""
