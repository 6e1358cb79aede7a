;;; emacs_eglot_check.el --- eglot driving the completer server as a user would  -*- lexical-binding: t -*-
;;
;; emacs --batch -Q --eval <package setup> -l <the doc's snippet> -l tests/emacs_eglot_check.el
;; Environment: COMPLETER_EMACS_FILE (a Python file), COMPLETER_EMACS_TYPED (JSON list of line starts),
;; COMPLETER_EMACS_OUT (JSON report).  M-x eglot on the file; then for each line start: type it on a new last
;; line, C-M-i (completion-at-point), C-x o to the *Completions* list and RET on its first line, as the keys
;; would.  The report holds, for each, the items C-M-i had, the line as it was after C-M-i and after RET, the lines
;; listed, and the settings the server says it has (completer/info).

(require 'json)
(require 'subr-x)

(defun completer-check--line ()
  "The text of the line at point."
  (buffer-substring-no-properties (line-beginning-position) (line-end-position)))

(defun completer-check--info (server)
  "completer/info once the server's worker has loaded the model (it may still be loading after M-x eglot)."
  (let ((deadline (+ (float-time) 60)) info)
    (while (and (not (plist-get (setq info (jsonrpc-request server :completer/info nil)) :model))
                (< (float-time) deadline))
      (sleep-for 0.2))
    info))

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
  "Record what COLLECTION (eglot's table) offers before C-M-i acts on it."
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

(defun completer-check--run ()
  "The report: the Emacs version, the server's settings and one entry per line start typed."
  (find-file (getenv "COMPLETER_EMACS_FILE"))
  (call-interactively #'eglot)
  (let ((deadline (+ (float-time) 60)))
    (while (and (not (eglot-current-server)) (< (float-time) deadline))
      (accept-process-output nil 0.2)))
  (let* ((server (or (eglot-current-server) (error "eglot did not connect")))
         (info (completer-check--info server)))
    `((emacs . ,emacs-version)
      (settings . ,(plist-get info :settings))
      (cases . ,(vconcat (mapcar #'completer-check--type
                                 (json-read-from-string (getenv "COMPLETER_EMACS_TYPED"))))))))

(let ((report (condition-case err (completer-check--run)
                (error `((error . ,(error-message-string err)))))))
  (with-temp-file (getenv "COMPLETER_EMACS_OUT")
    (insert (json-encode report)))
  (when-let ((server (ignore-errors (eglot-current-server))))
    (ignore-errors (eglot-shutdown server)))
  (kill-emacs 0))

;;; emacs_eglot_check.el ends here
