;;; emacs_completion_check.el --- typing a line start and taking C-M-i's first line  -*- lexical-binding: t -*-
;;
;; Loaded by tests/emacs_eglot_check.el and tests/emacs_lsp_mode_check.el: what a user does in any Emacs LSP client
;; (completion-at-point, then RET on the first line of *Completions*), and what each step left.

(require 'subr-x)

(defun completer-check--line ()
  "The text of the line at point."
  (buffer-substring-no-properties (line-beginning-position) (line-end-position)))

(defun completer-check--listed ()
  "The completions *Completions* shows, top to bottom; nil when it shows none."
  (when-let ((window (get-buffer-window "*Completions*")))
    (with-selected-window window
      (goto-char (point-min))
      (let (listed seen)
        (next-completion 1)
        (while (and (get-text-property (point) 'mouse-face) (not (memq (point) seen)))
          (push (point) seen)
          (push (buffer-substring-no-properties
                 (point) (next-single-property-change (point) 'mouse-face nil (point-max)))
                listed)
          (next-completion 1))
        (nreverse listed)))))

(defun completer-check--pick-first ()
  "C-x o into the *Completions* list, RET on its first line."
  (select-window (get-buffer-window "*Completions*"))
  (goto-char (point-min))
  (next-completion 1)
  (choose-completion))

(defvar completer-check--offered nil
  "The items' completion strings C-M-i last had to choose from (recorded on its way to `completion-in-region').")

(defun completer-check--record (_start _end collection &optional pred)
  "Record what COLLECTION (the LSP client's table) offers before C-M-i acts on it."
  (setq completer-check--offered (all-completions "" collection pred)))

(advice-add 'completion-in-region :before #'completer-check--record)

(defun completer-check--type (typed)
  "TYPED on a new last line, C-M-i, and the first line listed taken; what each step left, as an alist."
  (let ((window (selected-window)) (start (goto-char (point-max))) after-capf listed)
    (unless (bolp) (insert "\n"))
    (insert typed)
    (setq completer-check--offered nil)
    (call-interactively #'completion-at-point)
    (setq after-capf (completer-check--line)
          listed (completer-check--listed))
    (when listed
      (completer-check--pick-first)
      (select-window window))
    (prog1 `((typed . ,typed) (offered . ,(vconcat (mapcar #'substring-no-properties completer-check--offered)))
             (after_capf . ,after-capf) (listed . ,(vconcat listed))
             (after_pick . ,(completer-check--line)) (lines . ,(count-lines (point-min) (point-max))))
      (when-let ((completions (get-buffer-window "*Completions*")))
        (delete-window completions))
      (delete-region start (point-max)))))

(provide 'emacs_completion_check)
