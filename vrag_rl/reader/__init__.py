"""The extractive page reader of the CPU stand-in policies (VRAG and VimRAG): reads a page by its
structure — table cells by their headers, the shortest span of the best sentence, a figure's labels and
caption — and says nothing when the page does not support an answer. See `reader.Reader`."""
from vrag_rl.reader.geometry import Frame, crop_box_of, map_layout
from vrag_rl.reader.question import QuestionForm, question_form
from vrag_rl.reader.reader import Reader, Reading

__all__ = ["Frame", "QuestionForm", "Reader", "Reading", "crop_box_of", "map_layout", "question_form"]
